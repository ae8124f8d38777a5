/**
 * Contract: web console sessions. A session created on one handle is seen
 * by another until it expires (by the `now` handed to `get`) or is deleted
 * on any handle; sessions are independent of each other.
 *
 * @module
 */
import { assertEquals } from "../../_asserts.ts";
import type { ContractCase } from "./_contract.ts";

function sessionId(): string {
  return crypto.randomUUID();
}

/** Cases of the console sessions. */
export const CONSOLE_SESSIONS_CONTRACT: readonly ContractCase[] = [
  {
    name: "console sessions: created on one handle, seen on another, deleted for both",
    async run({ store, another }) {
      const expiresAt = Date.now() + 3_600_000;
      const id = sessionId();
      const kept = sessionId();
      assertEquals(await store.consoleSessions.get(id), null);
      await store.consoleSessions.create(id, expiresAt);
      await store.consoleSessions.create(kept, expiresAt + 1);
      const other = await another();
      assertEquals(await other.consoleSessions.get(id), expiresAt);
      assertEquals(await other.consoleSessions.get(kept), expiresAt + 1);
      assertEquals(await other.consoleSessions.get(sessionId()), null, "an unknown id");
      await other.consoleSessions.delete(id);
      assertEquals(await store.consoleSessions.get(id), null, "deleted on the other handle");
      assertEquals(await other.consoleSessions.get(id), null);
      assertEquals(await store.consoleSessions.get(kept), expiresAt + 1, "the other session stays");
      await store.consoleSessions.delete(id); // deleting again is nothing
      await store.consoleSessions.delete(sessionId());
    },
  },
  {
    name: "console sessions: get refuses a session once its expiry has passed by the given now",
    async run({ store, another }) {
      const expiresAt = Date.now() + 3_600_000;
      const id = sessionId();
      await store.consoleSessions.create(id, expiresAt);
      const other = await another();
      for (const handle of [store, other]) {
        assertEquals(await handle.consoleSessions.get(id, expiresAt - 1), expiresAt);
        assertEquals(
          await handle.consoleSessions.get(id, expiresAt),
          null,
          "expired at its expiry",
        );
        assertEquals(await handle.consoleSessions.get(id, expiresAt + 60_000), null);
      }
      // Expired for one caller's clock, still live for an earlier one: get decides, nothing is lost.
      assertEquals(await store.consoleSessions.get(id, expiresAt - 1000), expiresAt);
    },
  },
];
