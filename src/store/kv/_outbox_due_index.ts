/**
 * Builds the Deno KV outbox's due index from every delivery and fan-out
 * record, for a file written before it (schema 1).
 *
 * @module
 */
import { deliveriesPrefix, outboxDueKey, outboxFanoutDueKey, outboxFanoutPrefix } from "./keys.ts";
import type { DeliveryHandle } from "./_delivery_claims.ts";

/** Due index entries written per commit while building the index. */
const INDEX_BUILD_PAGE = 500;

/** The due index entry of a stored delivery or fan-out record, as read raw. */
function dueEntryOf(entry: Deno.KvEntry<unknown>): Deno.KvKey | null {
  const { key, value } = entry;
  const raw = typeof value === "object" && value !== null
    ? (value as { next_attempt_at?: unknown }).next_attempt_at
    : undefined;
  // An unreadable record is indexed anyway, so that claiming it reports it.
  const at = typeof raw === "number" && Number.isFinite(raw) ? raw : 0;
  if (key.length === 4 && typeof key[2] === "string" && typeof key[3] === "string") {
    return outboxDueKey(at, key[2], key[3]);
  }
  if (key.length === 3 && typeof key[2] === "string") return outboxFanoutDueKey(at, key[2]);
  return null;
}

/**
 * Builds the due index from every delivery and fan-out record, page by page
 * (a file of schema 1 has none). Writing an entry again is harmless, so a
 * build cut short is simply run again; an entry of a record changed
 * meanwhile is at worst stale.
 *
 * @returns How many index entries were written.
 */
export async function buildDueIndex(store: DeliveryHandle): Promise<number> {
  let count = 0;
  for (const prefix of [deliveriesPrefix(), outboxFanoutPrefix()]) {
    let cursor: string | undefined;
    for (;;) {
      const page = await store.retry(async () => {
        const out: Deno.KvEntry<unknown>[] = [];
        const entries = store.kv.list({ prefix }, {
          limit: INDEX_BUILD_PAGE,
          batchSize: INDEX_BUILD_PAGE,
          cursor,
        });
        for await (const entry of entries) out.push(entry);
        return { entries: out, cursor: entries.cursor };
      });
      const keys = page.entries.map(dueEntryOf).filter((key) => key !== null);
      for (let i = 0; i < keys.length; i += 100) {
        const part = keys.slice(i, i + 100);
        await store.retry(() => {
          const atomic = store.kv.atomic();
          for (const key of part) atomic.set(key, null);
          return atomic.commit();
        });
      }
      count += keys.length;
      if (page.entries.length < INDEX_BUILD_PAGE) break;
      cursor = page.cursor;
    }
  }
  return count;
}
