/**
 * Test helpers of the audit tests: a store in a temp data dir, and direct
 * access to the stored entry bytes for tampering.
 *
 * @module
 */
import { type KvStore, openKvStore } from "../../src/store/kv/kv_store.ts";
import { auditEntryKey, auditEntryPartKey } from "../../src/store/kv/keys.ts";

/** A store on a KV file in a fresh temp dir; disposing closes it and removes the dir. */
export async function tempStore(): Promise<{ store: KvStore; dataDir: string } & AsyncDisposable> {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-audit-" });
  const store = await openKvStore({ dataDir });
  return {
    store,
    dataDir,
    [Symbol.asyncDispose]: async () => {
      store.close();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
}

/** Reads the stored JSON of entry `seq` straight from KV (single-part entries). */
export async function readRaw(store: KvStore, seq: number): Promise<Record<string, unknown>> {
  const entry = await store.kv.get<Uint8Array>(auditEntryPartKey(seq, 0));
  if (!(entry.value instanceof Uint8Array)) throw new Error(`no entry ${seq}`);
  return JSON.parse(new TextDecoder().decode(entry.value));
}

/** Writes `value` as the stored JSON of entry `seq`, bypassing the log. */
export async function writeRaw(store: KvStore, seq: number, value: unknown): Promise<void> {
  await store.kv.set(auditEntryPartKey(seq, 0), new TextEncoder().encode(JSON.stringify(value)));
}

/** Deletes every part of entry `seq`, bypassing the log. */
export async function deleteRaw(store: KvStore, seq: number): Promise<void> {
  for await (const part of store.kv.list({ prefix: auditEntryKey(seq) })) {
    await store.kv.delete(part.key);
  }
}

/** A `tool.call` entry input. */
export function toolCall(tool: string, input: unknown = {}, sessionId = "s1") {
  return {
    kind: "tool.call",
    tool,
    session_id: sessionId,
    input,
    outcome: { ok: true, latency_ms: 1 },
  };
}
