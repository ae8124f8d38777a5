/**
 * MCP upstream plugins added with `toolgate plugins add`, and the live plugin
 * states that running servers publish for `toolgate plugins list`.
 *
 * Every change of an upstream bumps the registrations version, so running
 * servers (which poll it) pick the change up without a restart. Values of
 * `env` and `headers` are stored as given: literals, or `keychain:<name>`
 * references resolved when the upstream connects (the secret itself is never
 * stored here).
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import {
  registrationsVersionKey,
  serverStatusKey,
  serverStatusPrefix,
  upstreamKey,
  upstreamsPrefix,
} from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import { removeRegistration } from "./_registrations.ts";
import {
  type NewUpstream,
  type ServerStatus,
  ServerStatusSchema,
  type UpstreamRecord,
  UpstreamRecordSchema,
} from "../records.ts";

function parseUpstream(value: unknown, name: string): UpstreamRecord {
  const parsed = UpstreamRecordSchema.safeParse(value);
  if (!parsed.success) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored upstream ${name} is unreadable: ${parsed.error.issues[0]?.message}`,
    );
  }
  return parsed.data;
}

/**
 * Stores a new upstream.
 *
 * @throws {GatewayError} `CONFLICT` when an upstream of that name exists.
 */
export async function addUpstream(store: KvHandle, input: NewUpstream): Promise<UpstreamRecord> {
  const now = new Date().toISOString();
  const record = UpstreamRecordSchema.parse({
    ...input,
    kind: "mcp",
    created_at: now,
    updated_at: now,
  });
  const key = upstreamKey(record.name);
  await store.retry(async () => {
    const result = await store.kv.atomic()
      .check({ key, versionstamp: null })
      .set(key, record)
      .sum(registrationsVersionKey(), 1n)
      .commit();
    if (!result.ok) {
      throw new GatewayError(
        "CONFLICT",
        `Cannot add plugin ${record.name}: a plugin of that name exists; remove it first`,
      );
    }
  });
  return record;
}

/** All stored upstreams, by name. */
export async function listUpstreams(store: KvHandle): Promise<UpstreamRecord[]> {
  return await store.retry(async () => {
    const out: UpstreamRecord[] = [];
    for await (const entry of store.kv.list({ prefix: upstreamsPrefix() })) {
      out.push(parseUpstream(entry.value, String(entry.key[2])));
    }
    return out;
  });
}

/**
 * Deletes a stored upstream.
 *
 * @returns Whether it existed.
 */
export function removeUpstream(store: KvHandle, name: string): Promise<boolean> {
  return removeRegistration(store, upstreamKey(name));
}

/**
 * Turns a stored upstream on or off. Always touches `updated_at`, so enabling
 * an enabled upstream makes running servers restart it (a retry after a
 * failed start).
 *
 * @returns The updated record, or `null` when there is none.
 */
export async function setUpstreamEnabled(
  store: KvHandle,
  name: string,
  enabled: boolean,
): Promise<UpstreamRecord | null> {
  const key = upstreamKey(name);
  return await store.retry(async () => {
    // Checked against the read entry; read again when it changed meanwhile.
    for (;;) {
      const entry = await store.kv.get(key);
      if (entry.value === null) return null;
      const record = { ...parseUpstream(entry.value, name), enabled };
      record.updated_at = new Date().toISOString();
      const result = await store.kv.atomic()
        .check(entry)
        .set(key, record)
        .sum(registrationsVersionKey(), 1n)
        .commit();
      if (result.ok) return record;
    }
  });
}

/**
 * Publishes a running server's plugin states; they expire after `ttlMs`
 * unless published again.
 */
export async function putServerStatus(
  store: KvHandle,
  status: ServerStatus,
  ttlMs: number,
): Promise<void> {
  const record = ServerStatusSchema.parse(status);
  await store.retry(() =>
    store.kv.set(serverStatusKey(record.server_id), record, { expireIn: ttlMs })
  );
}

/** Withdraws a server's published states (on shutdown). */
export async function deleteServerStatus(store: KvHandle, serverId: string): Promise<void> {
  await store.retry(() => store.kv.delete(serverStatusKey(serverId)));
}

/**
 * The states published by running servers, newest first; entries older
 * than `maxAgeMs` (a server that died without withdrawing) are left out.
 */
export async function listServerStatuses(
  store: KvHandle,
  maxAgeMs: number,
  now: number = Date.now(),
): Promise<ServerStatus[]> {
  const out: ServerStatus[] = [];
  await store.retry(async () => {
    out.length = 0;
    for await (const entry of store.kv.list({ prefix: serverStatusPrefix() })) {
      const parsed = ServerStatusSchema.safeParse(entry.value);
      if (!parsed.success) continue;
      if (now - Date.parse(parsed.data.updated_at) > maxAgeMs) continue;
      out.push(parsed.data);
    }
  });
  return out.sort((a, b) => b.updated_at.localeCompare(a.updated_at));
}
