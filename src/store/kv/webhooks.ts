/**
 * Stored webhook registrations: outgoing targets and incoming endpoints.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { newId } from "../../ids.ts";
import {
  deadLetterStreakKey,
  incomingLogPrefix,
  incomingNameIndexKey,
  incomingPathIndexKey,
  incomingStatsPrefix,
  incomingWebhookKey,
  incomingWebhooksPrefix,
  outgoingWebhookKey,
  outgoingWebhooksPrefix,
  registrationsVersionKey,
} from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import {
  type DeliveryOutcome,
  type IncomingStats,
  type IncomingWebhook,
  IncomingWebhookSchema,
  type ListedOutgoingWebhook,
  type ListOutgoingOptions,
  type NewIncomingWebhook,
  type NewOutgoingWebhook,
  type OutgoingWebhook,
  type OutgoingWebhookPatch,
  OutgoingWebhookSchema,
  patchOutgoingWebhook,
} from "../records.ts";
import { parseRecord } from "../_records.ts";
import {
  hasPlaintextSecret,
  openIncoming,
  openOutgoing,
  openOutgoingReporting,
  sealIncoming,
  sealOutgoing,
  sealStored,
  StoredIncomingWebhookSchema,
} from "../_sealed_secrets.ts";

function bump(atomic: Deno.AtomicOperation): Deno.AtomicOperation {
  return atomic.sum(registrationsVersionKey(), 1n);
}

/** Stores a new outgoing webhook and returns it. */
export async function addOutgoingWebhook(
  store: KvHandle,
  input: NewOutgoingWebhook,
): Promise<OutgoingWebhook> {
  const record = OutgoingWebhookSchema.parse({
    id: newId("wh"),
    url: input.url,
    events: input.events,
    ...(input.secret ? { secret: input.secret } : {}),
    ...(input.description ? { description: input.description } : {}),
    ...(input.retry_schedule_ms ? { retry_schedule_ms: input.retry_schedule_ms } : {}),
    created_at: new Date().toISOString(),
  });
  const key = outgoingWebhookKey(record.id);
  const stored = await sealOutgoing(store.dataKey, record);
  await store.retry(async () => {
    const result = await bump(store.kv.atomic().check({ key, versionstamp: null }).set(key, stored))
      .commit();
    if (!result.ok) throw new GatewayError("CONFLICT", `Webhook id ${record.id} already exists`);
  });
  return record;
}

/** All outgoing webhooks, oldest first. */
export async function listOutgoingWebhooks(
  store: KvHandle,
  options: ListOutgoingOptions = {},
): Promise<ListedOutgoingWebhook[]> {
  const open = options.unreadableSecrets === "report" ? openOutgoingReporting : openOutgoing;
  const entries = await store.retry(async () => {
    const out: Deno.KvEntry<unknown>[] = [];
    for await (const entry of store.kv.list({ prefix: outgoingWebhooksPrefix() })) out.push(entry);
    return out;
  });
  return await Promise.all(
    entries.map((entry) => open(store.dataKey, entry.value, `webhook ${String(entry.key[2])}`)),
  );
}

/** One outgoing webhook, or `null`. */
export async function getOutgoingWebhook(
  store: KvHandle,
  id: string,
): Promise<OutgoingWebhook | null> {
  const entry = await store.retry(() => store.kv.get(outgoingWebhookKey(id)));
  return entry.value === null ? null : await openOutgoing(store.dataKey, entry.value, id);
}

/** Changes an outgoing webhook (read, patch, write if unchanged meanwhile). */
export async function updateOutgoingWebhook(
  store: KvHandle,
  id: string,
  patch: OutgoingWebhookPatch,
): Promise<OutgoingWebhook | null> {
  const key = outgoingWebhookKey(id);
  return await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get(key);
      if (entry.value === null) return null;
      const next = patchOutgoingWebhook(await openOutgoing(store.dataKey, entry.value, id), patch);
      const sealed = await sealOutgoing(store.dataKey, next);
      const atomic = store.kv.atomic().check(entry).set(key, sealed);
      // Enabled again: the dead letters that disabled it no longer count.
      if (patch.disabled === null) atomic.delete(deadLetterStreakKey(id));
      const result = await bump(atomic).commit();
      if (result.ok) return next;
    }
  });
}

/** Records an event's final outcome at an outgoing webhook; returns the dead-letter streak. */
export async function recordWebhookOutcome(
  store: KvHandle,
  id: string,
  outcome: DeliveryOutcome,
): Promise<number> {
  const key = deadLetterStreakKey(id);
  const webhookKey = outgoingWebhookKey(id);
  return await store.retry(async () => {
    for (;;) {
      const [entry, webhook] = await store.kv.getMany<[Deno.KvU64, unknown]>([key, webhookKey]);
      // A removed webhook keeps no streak (it would outlive it).
      if (webhook.value === null) return 0;
      const streak = outcome === "delivered" ? 0n : (entry.value?.value ?? 0n) + 1n;
      if (outcome === "delivered" && entry.value === null) return 0;
      const atomic = store.kv.atomic().check(entry, webhook);
      const result =
        await (streak === 0n ? atomic.delete(key) : atomic.set(key, new Deno.KvU64(streak)))
          .commit();
      if (result.ok) return Number(streak);
    }
  });
}

/**
 * Stores a new incoming endpoint; name and path are unique.
 *
 * @throws {GatewayError} `CONFLICT` when the name or path is taken.
 */
export async function addIncomingWebhook(
  store: KvHandle,
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
  const stored = await sealIncoming(store.dataKey, record);
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
        .set(key, stored)
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
  // As a read returns it (a secret left undefined has no key).
  return await openIncoming(store.dataKey, stored, record.id);
}

/** All incoming endpoints, oldest first. */
export async function listIncomingWebhooks(store: KvHandle): Promise<IncomingWebhook[]> {
  const entries = await store.retry(async () => {
    const out: Deno.KvEntry<unknown>[] = [];
    for await (const entry of store.kv.list({ prefix: incomingWebhooksPrefix() })) out.push(entry);
    return out;
  });
  return await Promise.all(
    entries.map((entry) =>
      openIncoming(store.dataKey, entry.value, `endpoint ${String(entry.key[2])}`)
    ),
  );
}

/** One incoming endpoint, or `null`. */
export async function getIncomingWebhook(
  store: KvHandle,
  id: string,
): Promise<IncomingWebhook | null> {
  const entry = await store.retry(() => store.kv.get(incomingWebhookKey(id)));
  return entry.value === null ? null : await openIncoming(store.dataKey, entry.value, id);
}

/**
 * Removes an outgoing webhook or incoming endpoint by id.
 *
 * @returns The removed record's kind, or `null` when no such id exists.
 */
export async function removeWebhook(
  store: KvHandle,
  id: string,
): Promise<"outgoing" | "incoming" | null> {
  return await store.retry(async () => {
    if (id.startsWith("wh_")) {
      const entry = await store.kv.get(outgoingWebhookKey(id));
      if (entry.value === null) return null;
      const result = await bump(
        store.kv.atomic().check(entry).delete(entry.key).delete(deadLetterStreakKey(id)),
      )
        .commit();
      if (!result.ok) throw new Error("database is locked (concurrent change)");
      return "outgoing";
    }
    if (id.startsWith("in_")) {
      const entry = await store.kv.get(incomingWebhookKey(id));
      if (entry.value === null) return null;
      const record = parseRecord(StoredIncomingWebhookSchema, entry.value, id);
      let atomic = store.kv.atomic().check(entry).delete(entry.key)
        .delete(incomingPathIndexKey(record.path))
        .delete(incomingNameIndexKey(record.name));
      for await (const stat of store.kv.list({ prefix: incomingStatsPrefix(id) })) {
        atomic = atomic.delete(stat.key);
      }
      // Its payload log goes with it (at most INCOMING_LOG_SIZE entries).
      for await (const logged of store.kv.list({ prefix: incomingLogPrefix(id) })) {
        atomic = atomic.delete(logged.key);
      }
      const result = await bump(atomic).commit();
      if (!result.ok) throw new Error("database is locked (concurrent change)");
      return "incoming";
    }
    return null;
  });
}

/** Reads the counters of an incoming endpoint. */
export async function readIncomingStats(store: KvHandle, id: string): Promise<IncomingStats> {
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

/**
 * Seals the webhook secrets an earlier release stored in plain text (run
 * as the store opens; idempotent, and a no-op once none is left).
 *
 * @returns How many registrations were rewritten.
 */
export async function sealPlaintextSecrets(store: KvHandle): Promise<number> {
  let sealed = 0;
  for (const prefix of [outgoingWebhooksPrefix(), incomingWebhooksPrefix()]) {
    const entries = await store.retry(async () => {
      const out: Deno.KvEntry<unknown>[] = [];
      for await (const entry of store.kv.list({ prefix })) {
        if (hasPlaintextSecret(entry.value)) out.push(entry);
      }
      return out;
    });
    for (let entry of entries) {
      for (;;) {
        const value = await sealStored(store.dataKey, entry.value);
        const result = await store.retry(() =>
          store.kv.atomic().check(entry).set(entry.key, value).commit()
        );
        if (result.ok) {
          sealed++;
          break;
        }
        // Changed meanwhile (by a release that seals): look again.
        const again = await store.retry(() => store.kv.get(entry.key));
        if (again.value === null || !hasPlaintextSecret(again.value)) break;
        entry = again as Deno.KvEntry<unknown>;
      }
    }
  }
  return sealed;
}
