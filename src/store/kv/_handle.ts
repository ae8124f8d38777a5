/**
 * What the Deno KV adapter's modules need of the store handle: the KV
 * connections, the data key, retries of "database is locked", batched
 * reads. `KvStore` (kv_store.ts) is one; the modules depend on this shape,
 * not on that class, so the handle and the modules it wires do not import
 * each other. Private to `src/store/kv`.
 *
 * @module
 */
import type { DataKey } from "../data_key.ts";

/** A KV store handle, as the adapter's modules use it. */
export interface KvHandle {
  /** The writer connection. */
  readonly kv: Deno.Kv;
  /** The connection for reads that need not see this handle's latest writes at once. */
  readonly reader: Deno.Kv;
  /** The key sealing secrets at rest. */
  readonly dataKey: DataKey;
  /** Runs `operation`, retrying while the file is locked by another process. */
  retry<T>(operation: () => Promise<T>): Promise<T>;
  /** A batched read of one key on the writer connection. */
  get<T>(key: Deno.KvKey): Promise<Deno.KvEntryMaybe<T>>;
  /** Closes the handle now. */
  closeSync(): void;
}
