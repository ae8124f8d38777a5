/**
 * Stored webhook registrations: outgoing targets and incoming endpoints.
 *
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../errors/mod.ts";
import { newId } from "../ids.ts";
import {
  incomingNameIndexKey,
  incomingPathIndexKey,
  incomingStatsPrefix,
  incomingWebhookKey,
  incomingWebhooksPrefix,
  outgoingWebhookKey,
  outgoingWebhooksPrefix,
  registrationsVersionKey,
} from "./keys.ts";
import type { Store } from "./store.ts";
import { parseRecord } from "./_records.ts";

/** A stored outgoing webhook. `events: "*"` means every enabled type, now and later. */
export const OutgoingWebhookSchema = z.strictObject({
  id: z.string().regex(/^wh_[0-9a-z]+$/),
  url: z.url({ protocol: /^https?$/ }),
  events: z.union([z.literal("*"), z.array(z.string()).min(1)]),
  secret: z.string().min(1).optional(),
  created_at: z.string(),
});

/** An outgoing webhook registration. */
export type OutgoingWebhook = z.infer<typeof OutgoingWebhookSchema>;

/** A stored incoming webhook endpoint. */
export const IncomingWebhookSchema = z.strictObject({
  id: z.string().regex(/^in_[0-9a-z]+$/),
  name: z.string().min(1),
  path: z.string().startsWith("/"),
  handler: z.string().min(1),
  secret: z.string().min(1).optional(),
  signature_header: z.string().min(1).optional(),
  rate_limit_per_s: z.number().positive().optional(),
  created_at: z.string(),
});

/** An incoming webhook registration. */
export type IncomingWebhook = z.infer<typeof IncomingWebhookSchema>;

/** Counters of one incoming endpoint. */
export interface IncomingStats {
  received: number;
  rejected: number;
  failed: number;
  last_received_at?: string;
}

function bump(atomic: Deno.AtomicOperation): Deno.AtomicOperation {
  return atomic.sum(registrationsVersionKey(), 1n);
}

/** New outgoing webhook fields. */
export interface NewOutgoingWebhook {
  url: string;
  events: "*" | string[];
  secret?: string;
}

/** Stores a new outgoing webhook and returns it. */
export async function addOutgoingWebhook(
  store: Store,
  input: NewOutgoingWebhook,
): Promise<OutgoingWebhook> {
  const record = OutgoingWebhookSchema.parse({
    id: newId("wh"),
    url: input.url,
    events: input.events,
    ...(input.secret ? { secret: input.secret } : {}),
    created_at: new Date().toISOString(),
  });
  const key = outgoingWebhookKey(record.id);
  await store.retry(async () => {
    const result = await bump(store.kv.atomic().check({ key, versionstamp: null }).set(key, record))
      .commit();
    if (!result.ok) throw new GatewayError("CONFLICT", `Webhook id ${record.id} already exists`);
  });
  return record;
}

/** All outgoing webhooks, oldest first. */
export async function listOutgoingWebhooks(store: Store): Promise<OutgoingWebhook[]> {
  return await store.retry(async () => {
    const out: OutgoingWebhook[] = [];
    for await (const entry of store.kv.list({ prefix: outgoingWebhooksPrefix() })) {
      out.push(parseRecord(OutgoingWebhookSchema, entry.value, `webhook ${String(entry.key[2])}`));
    }
    return out;
  });
}

/** One outgoing webhook, or `null`. */
export async function getOutgoingWebhook(
  store: Store,
  id: string,
): Promise<OutgoingWebhook | null> {
  const entry = await store.retry(() => store.kv.get(outgoingWebhookKey(id)));
  return entry.value === null ? null : parseRecord(OutgoingWebhookSchema, entry.value, id);
}

/** New incoming endpoint fields. */
export interface NewIncomingWebhook {
  name: string;
  path: string;
  handler: string;
  secret?: string;
  signature_header?: string;
  rate_limit_per_s?: number;
}

/**
 * Stores a new incoming endpoint; name and path are unique.
 *
 * @throws {GatewayError} `CONFLICT` when the name or path is taken.
 */
export async function addIncomingWebhook(
  store: Store,
  input: NewIncomingWebhook,
): Promise<IncomingWebhook> {
  const record = IncomingWebhookSchema.parse({
    id: newId("in"),
    ...input,
    created_at: new Date().toISOString(),
  });
  const key = incomingWebhookKey(record.id);
  const pathKey = incomingPathIndexKey(record.path);
  const nameKey = incomingNameIndexKey(record.name);
  await store.retry(async () => {
    const [byPath, byName] = await store.kv.getMany([pathKey, nameKey]);
    if (byPath.value !== null) {
      throw new GatewayError(
        "CONFLICT",
        `Invalid --url: path ${record.path} is already used by ${String(byPath.value)}`,
      );
    }
    if (byName.value !== null) {
      throw new GatewayError(
        "CONFLICT",
        `Invalid --name: "${record.name}" is already used by ${String(byName.value)}`,
      );
    }
    const result = await bump(
      store.kv.atomic()
        .check(byPath)
        .check(byName)
        .check({ key, versionstamp: null })
        .set(key, record)
        .set(pathKey, record.id)
        .set(nameKey, record.id),
    ).commit();
    if (!result.ok) {
      throw new GatewayError(
        "CONFLICT",
        `Invalid --url or --name: registered concurrently by another process`,
      );
    }
  });
  return record;
}

/** All incoming endpoints, oldest first. */
export async function listIncomingWebhooks(store: Store): Promise<IncomingWebhook[]> {
  return await store.retry(async () => {
    const out: IncomingWebhook[] = [];
    for await (const entry of store.kv.list({ prefix: incomingWebhooksPrefix() })) {
      out.push(parseRecord(IncomingWebhookSchema, entry.value, `endpoint ${String(entry.key[2])}`));
    }
    return out;
  });
}

/** One incoming endpoint, or `null`. */
export async function getIncomingWebhook(
  store: Store,
  id: string,
): Promise<IncomingWebhook | null> {
  const entry = await store.retry(() => store.kv.get(incomingWebhookKey(id)));
  return entry.value === null ? null : parseRecord(IncomingWebhookSchema, entry.value, id);
}

/**
 * Removes an outgoing webhook or incoming endpoint by id.
 *
 * @returns The removed record's kind, or `null` when no such id exists.
 */
export async function removeWebhook(
  store: Store,
  id: string,
): Promise<"outgoing" | "incoming" | null> {
  return await store.retry(async () => {
    if (id.startsWith("wh_")) {
      const entry = await store.kv.get(outgoingWebhookKey(id));
      if (entry.value === null) return null;
      const result = await bump(store.kv.atomic().check(entry).delete(entry.key)).commit();
      if (!result.ok) throw new Error("database is locked (concurrent change)");
      return "outgoing";
    }
    if (id.startsWith("in_")) {
      const entry = await store.kv.get(incomingWebhookKey(id));
      if (entry.value === null) return null;
      const record = parseRecord(IncomingWebhookSchema, entry.value, id);
      let atomic = store.kv.atomic().check(entry).delete(entry.key)
        .delete(incomingPathIndexKey(record.path))
        .delete(incomingNameIndexKey(record.name));
      for await (const stat of store.kv.list({ prefix: incomingStatsPrefix(id) })) {
        atomic = atomic.delete(stat.key);
      }
      const result = await bump(atomic).commit();
      if (!result.ok) throw new Error("database is locked (concurrent change)");
      return "incoming";
    }
    return null;
  });
}

/** Reads the counters of an incoming endpoint. */
export async function readIncomingStats(store: Store, id: string): Promise<IncomingStats> {
  const stats: IncomingStats = { received: 0, rejected: 0, failed: 0 };
  await store.retry(async () => {
    for await (const entry of store.kv.list({ prefix: incomingStatsPrefix(id) })) {
      const counter = entry.key[3];
      if (counter === "last") stats.last_received_at = String(entry.value);
      else if (counter === "received" || counter === "rejected" || counter === "failed") {
        stats[counter] = Number((entry.value as Deno.KvU64).value);
      }
    }
  });
  return stats;
}
