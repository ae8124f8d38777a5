/**
 * The payload logs of incoming endpoints in Deno KV: each endpoint's newest
 * payloads and what became of them. Private to `src/store/kv`.
 *
 * @module
 */
import { incomingLogKey, incomingLogPrefix } from "./keys.ts";
import { INCOMING_LOG_SIZE, type IncomingLogEntry, IncomingLogEntrySchema } from "../records.ts";
import type { IncomingKvHandle as KvStore } from "./_incoming_claims.ts";

/** Writes payload log entries and trims each endpoint's log to its newest entries. */
export async function logIncomingPayloads(
  store: KvStore,
  entries: readonly IncomingLogEntry[],
): Promise<void> {
  if (!entries.length) return;
  const records = entries.map((entry) => IncomingLogEntrySchema.parse(entry));
  for (let i = 0; i < records.length; i += 10) {
    await store.retry(async () => {
      const atomic = store.kv.atomic();
      for (const entry of records.slice(i, i + 10)) {
        atomic.set(incomingLogKey(entry.endpoint_id, entry.id), entry);
      }
      await atomic.commit();
    });
  }
  for (const endpointId of new Set(records.map((entry) => entry.endpoint_id))) {
    await store.retry(async () => {
      const old: Deno.KvKey[] = [];
      let seen = 0;
      for await (
        const entry of store.kv.list({ prefix: incomingLogPrefix(endpointId) }, { reverse: true })
      ) {
        if (++seen > INCOMING_LOG_SIZE) old.push(entry.key);
      }
      for (let i = 0; i < old.length; i += 100) {
        const atomic = store.kv.atomic();
        for (const key of old.slice(i, i + 100)) atomic.delete(key);
        await atomic.commit();
      }
    });
  }
}

/** An endpoint's payload log, newest first. */
export async function readIncomingPayloadLog(
  store: KvStore,
  endpointId: string,
  limit: number = INCOMING_LOG_SIZE,
): Promise<IncomingLogEntry[]> {
  const most = Math.max(0, Math.min(limit, INCOMING_LOG_SIZE));
  if (!most) return [];
  return await store.retry(async () => {
    const entries: IncomingLogEntry[] = [];
    for await (
      const entry of store.kv.list({ prefix: incomingLogPrefix(endpointId) }, {
        reverse: true,
        limit: most,
      })
    ) {
      const parsed = IncomingLogEntrySchema.safeParse(entry.value);
      if (parsed.success) entries.push(parsed.data);
    }
    return entries;
  });
}
