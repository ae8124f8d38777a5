/**
 * Change notification on Deno KV: nothing is pushed. `kv.watch` does not see
 * writes made by other processes on the same file, so callers poll the
 * counters (`registrationsVersion()`, `deliveries.version()`), and events
 * stay in the process that emitted them.
 *
 * @module
 */
import type { ChangeFeed } from "../store.ts";

/** The Deno KV {@linkcode ChangeFeed}: pushes nothing; callers poll. */
export const KV_CHANGE_FEED: ChangeFeed = Object.freeze({
  pushed: false,
  subscribe: () => () => {},
  publishEvents: () => Promise.resolve(),
  subscribeEvents: () => () => {},
});
