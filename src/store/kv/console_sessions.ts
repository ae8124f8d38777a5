/**
 * Web console sessions in KV: one record per session under the SHA-256 of
 * its id, holding its expiry, written with an `expireIn` so KV drops it by
 * itself some time after it lapses (`get` decides by the expiry it holds).
 *
 * @module
 */
import { z } from "zod";
import { CONSOLE_SESSION_SLACK_MS, consoleSessionHash } from "../_console_sessions.ts";
import { parseRecord } from "../_records.ts";
import type { ConsoleSessionStore } from "../store.ts";
import { consoleSessionKey } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";

/** A stored session: its expiry, in ms since the epoch. */
const ConsoleSessionRecordSchema = z.object({ expires_at: z.number().int() });

/** The console sessions, on Deno KV. */
export function createKvConsoleSessionStore(store: KvHandle): ConsoleSessionStore {
  return {
    async create(id, expiresAt) {
      const record = ConsoleSessionRecordSchema.parse({ expires_at: expiresAt });
      const expireIn = Math.max(expiresAt - Date.now(), 0) + CONSOLE_SESSION_SLACK_MS;
      await store.retry(() =>
        store.kv.set(consoleSessionKey(consoleSessionHash(id)), record, { expireIn })
      );
    },
    async get(id, now = Date.now()) {
      const hash = consoleSessionHash(id);
      const entry = await store.get(consoleSessionKey(hash));
      if (entry.value === null) return null;
      const { expires_at } = parseRecord(
        ConsoleSessionRecordSchema,
        entry.value,
        `console session ${hash.slice(0, 12)}…`,
      );
      return expires_at > now ? expires_at : null;
    },
    async delete(id) {
      await store.retry(() => store.kv.delete(consoleSessionKey(consoleSessionHash(id))));
    },
  };
}
