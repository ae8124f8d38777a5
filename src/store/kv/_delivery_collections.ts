/**
 * How the Deno KV writer decides, at commit time and from what is stored,
 * which `collect_event` ops of a commit go ahead.
 *
 * @module
 */
import { deliveryKey, eventDeliveriesPrefix, outboxFanoutKey } from "./keys.ts";
import type { DeliveryHandle } from "./_delivery_claims.ts";
import { apply, type Guarded, type Mutation } from "./_delivery_plan.ts";

// The storage contract's rule: an event's record and body live as long as
// any delivery of it is pending, as a fan-out entry or a delivery record of
// its own. A `collect_event` is the writer's request to delete the event when
// nothing refers to it any more; the writer decides at commit time from what
// is stored, never from what the requester believes (a dispatcher that
// evicted a retry to the store, or restarted, does not hold every reference).
//
// A collection is decided in one of two ways, both checked in the commit:
//
// - In place ("checked"), for an event whose record lists its webhooks (at
//   most MAX_CHECKED_WEBHOOKS): the commit checks the event record as read,
//   that its fan-out record is absent (unless the commit itself deletes it)
//   and that no delivery record exists under any of those webhooks (unless
//   the commit deletes it). No read; a failed check sends the batch to the
//   next way.
// - By reading ("read"): the event's fan-out record and its delivery
//   records are read, the commit's own writes applied to them, and the
//   collection goes into the commit only when none is left, checking the
//   event record and the fan-out record as read.
//
// Both rest on one fact: a delivery record is only ever created in a commit
// that also writes its event's fan-out record (the first failed attempt of a
// fan-out entry leaves it) or its event record (a DLQ replay, which adds its
// webhook to the record's list), and only under a webhook of the event's
// list; so a record created after the decision fails the commit's checks.

/** How a commit's collections are decided (see above). */
export type CollectionMode = "checked" | "read" | "none";

/** The collections of a commit, as decided on what is stored (see above). */
export interface Collections {
  /** Adds the collections that go ahead, with their checks. */
  apply(atomic: Deno.AtomicOperation): void;
  /** The event ids of `unit`'s collections that do not go ahead (referenced). */
  uncollected(unit: { guarded: readonly Guarded[] }): string[];
}

function sameKey(a: Deno.KvKey, b: Deno.KvKey): boolean {
  return a.length === b.length && a.every((part, i) => part === b[i]);
}

/** What a commit's own writes leave of an event's fan-out record and delivery records. */
function writtenReferences(plain: readonly Mutation[], eventId: string) {
  const fanoutKey = outboxFanoutKey(eventId);
  /** true: written, false: deleted, absent: untouched. */
  let fanout: boolean | undefined;
  const records = new Map<string, boolean>();
  for (const m of plain) {
    if (m.key[0] !== "outbox" || m.key[2] !== eventId) continue;
    if (m.key[1] === "fanout" && sameKey(m.key, fanoutKey)) fanout = m.type === "set";
    else if (m.key[1] === "delivery" && m.key.length === 4) {
      records.set(String(m.key[3]), m.type === "set");
    }
  }
  return { fanout, records };
}

/**
 * Decides which collections of `units` go into a commit that also applies
 * `plain`, in order: those whose event nothing refers to once the commit is
 * done. `mode` "checked" decides in place the events whose webhooks are
 * known (the others by reading), "read" reads for every one.
 */
export async function resolveCollections(
  store: DeliveryHandle,
  plain: readonly Mutation[],
  units: readonly { guarded: readonly Guarded[] }[],
  mode: Exclude<CollectionMode, "none">,
): Promise<Collections> {
  const byEvent = new Map<string, Guarded>();
  for (const unit of units) {
    for (const g of unit.guarded) if (!byEvent.has(g.eventId)) byEvent.set(g.eventId, g);
  }
  const referenced = new Set<string>();
  const checks: Deno.AtomicCheck[] = [];
  await Promise.all([...byEvent.values()].map(async ({ eventId, webhookIds }) => {
    const written = writtenReferences(plain, eventId);
    const fanoutKey = outboxFanoutKey(eventId);
    if (mode === "checked" && webhookIds) {
      const listed = new Set(webhookIds);
      const open = written.fanout === true ||
        [...written.records].some(([id, set]) => set || !listed.has(id));
      if (open) {
        referenced.add(eventId);
        return;
      }
      if (written.fanout === undefined) checks.push({ key: fanoutKey, versionstamp: null });
      for (const id of webhookIds) {
        if (!written.records.has(id)) {
          checks.push({ key: deliveryKey(eventId, id), versionstamp: null });
        }
      }
      return;
    }
    const { fanout, records } = await store.retry(async () => {
      const fanout = await store.kv.get(fanoutKey);
      const records = new Set<string>();
      for await (const entry of store.kv.list({ prefix: eventDeliveriesPrefix(eventId) })) {
        records.add(String(entry.key[entry.key.length - 1]));
      }
      return { fanout, records };
    });
    const hasFanout = written.fanout ?? fanout.value !== null;
    for (const [id, set] of written.records) {
      if (set) records.add(id);
      else records.delete(id);
    }
    if (hasFanout || records.size) referenced.add(eventId);
    else checks.push({ key: fanoutKey, versionstamp: fanout.versionstamp });
  }));
  return {
    apply(atomic) {
      for (const check of checks) atomic.check(check);
      for (const g of byEvent.values()) {
        if (referenced.has(g.eventId)) continue;
        atomic.check(g.check);
        apply(atomic, g.mutations);
      }
    },
    uncollected: (unit) =>
      unit.guarded.filter((g) => referenced.has(g.eventId)).map((g) => g.eventId),
  };
}
