/**
 * The Deno KV dead-letter queue's order index and count: planned in the
 * writer's commits, and built once for a store written before them.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import {
  dlqCountKey,
  dlqIndexedKey,
  dlqKey,
  dlqOrderKey,
  dlqOrderPrefix,
  dlqPrefix,
  dlqVersionKey,
  dlqWebhookOrderKey,
  dlqWebhookOrderPrefix,
} from "./keys.ts";
import { type DlqRecord, DlqRecordSchema } from "../records.ts";
import { parseRecord } from "../_records.ts";
import type { DeliveryHandle } from "./_delivery_claims.ts";
import { apply, type DlqOp, type Mutation } from "./_delivery_plan.ts";

// Beside each record (`dlqKey`), the KV store keeps two index entries, by
// failure time (`dlqOrderKey`) and by webhook and failure time
// (`dlqWebhookOrderKey`), and a count (`dlqCountKey`), so that a page of the
// queue and its size cost a few reads however long it is. The writer keeps
// them in the commit that writes a record: it reads the records its DLQ ops
// touch (to find a replaced record's old entries and whether the count
// moves) and checks them in the commit, planning again when another handle
// changed one meanwhile. Stores written before the index have no
// `dlqIndexedKey`: their writers only bump `dlqVersionKey`, and the first
// page or count builds the index ({@linkcode ensureDlqIndex}).

/** Rounds a DLQ commit may lose to other handles changing the same records. */
export const MAX_DLQ_ROUNDS = 20;

export function dlqRaceLost(round: number): void {
  if (round >= MAX_DLQ_ROUNDS) {
    throw new GatewayError(
      "UNAVAILABLE",
      `Cannot write dead-letter records: other writers kept changing them (${round} attempts)`,
    );
  }
}

/** The checks and writes a commit with DLQ ops adds (see above). */
export interface DlqPlan {
  apply(atomic: Deno.AtomicOperation): void;
}

/** Reads up to 10 keys per `getMany`, in parallel. */
export async function readKeys(store: DeliveryHandle, keys: readonly Deno.KvKey[]) {
  const parts: Deno.KvKey[][] = [];
  for (let i = 0; i < keys.length; i += 10) parts.push(keys.slice(i, i + 10));
  const read = await Promise.all(
    parts.map((part) => store.retry(() => store.kv.getMany<unknown[]>(part))),
  );
  return read.flat();
}

/** Plans the index entries and count of `ops`, applied in order, on what is stored now. */
export async function planDlq(store: DeliveryHandle, ops: readonly DlqOp[]): Promise<DlqPlan> {
  const ids = [...new Set(ops.map((op) => op.op === "put_dlq" ? op.record.dlq_id : op.dlq_id))];
  const [marker, ...entries] = await readKeys(store, [dlqIndexedKey(), ...ids.map(dlqKey)]);
  if (marker.value === null) {
    // Not indexed yet: tell a build running meanwhile that it must look again.
    return {
      apply(atomic) {
        atomic.check({ key: dlqIndexedKey(), versionstamp: null });
        atomic.sum(dlqVersionKey(), 1n);
      },
    };
  }
  const state = new Map<string, Pick<DlqRecord, "webhook_id" | "failed_at"> | null>();
  entries.forEach((entry, i) => {
    state.set(
      ids[i],
      entry.value === null
        ? null
        : parseRecord(DlqRecordSchema, entry.value, `DLQ record ${ids[i]}`),
    );
  });
  const sets = new Map<string, { key: Deno.KvKey; value: unknown }>();
  const deletes = new Map<string, Deno.KvKey>();
  const set = (key: Deno.KvKey, value: unknown) => {
    const name = JSON.stringify(key);
    deletes.delete(name);
    sets.set(name, { key, value });
  };
  const remove = (key: Deno.KvKey) => {
    const name = JSON.stringify(key);
    sets.delete(name);
    deletes.set(name, key);
  };
  let delta = 0;
  for (const op of ops) {
    const id = op.op === "put_dlq" ? op.record.dlq_id : op.dlq_id;
    const before = state.get(id) ?? null;
    const after = op.op === "put_dlq" ? op.record : null;
    if (
      before &&
      (!after || after.failed_at !== before.failed_at || after.webhook_id !== before.webhook_id)
    ) {
      remove(dlqOrderKey(before.failed_at, id));
      remove(dlqWebhookOrderKey(before.webhook_id, before.failed_at, id));
    }
    if (after) {
      set(dlqOrderKey(after.failed_at, id), after.webhook_id);
      set(dlqWebhookOrderKey(after.webhook_id, after.failed_at, id), null);
    }
    delta += (after ? 1 : 0) - (before ? 1 : 0);
    state.set(id, after);
  }
  return {
    apply(atomic) {
      atomic.check({ key: dlqIndexedKey(), versionstamp: marker.versionstamp });
      entries.forEach((entry) =>
        atomic.check({ key: entry.key, versionstamp: entry.versionstamp })
      );
      for (const key of deletes.values()) atomic.delete(key);
      for (const { key, value } of sets.values()) atomic.set(key, value);
      if (delta !== 0) atomic.sum(dlqCountKey(), BigInt.asUintN(64, BigInt(delta)));
    },
  };
}

/** Stores whose DLQ index this process saw built (it is never unbuilt). */
const dlqIndexed = new WeakSet<DeliveryHandle>();

/**
 * Builds the DLQ's index entries and count of a store written before them:
 * every record is read once, stray entries of a build cut short are
 * removed, and the marker is set in a commit that checks no DLQ write came
 * meanwhile (else it looks again).
 *
 * @throws {GatewayError} `UNAVAILABLE` when writers keep changing the queue.
 */
export async function ensureDlqIndex(store: DeliveryHandle): Promise<void> {
  if (dlqIndexed.has(store)) return;
  for (let round = 1;; round++) {
    const [marker, version] = await readKeys(store, [dlqIndexedKey(), dlqVersionKey()]);
    if (marker.value !== null) break;
    const records = await listAllDlq(store);
    const wanted = new Map<string, { key: Deno.KvKey; value: unknown }>();
    for (const r of records) {
      const order = dlqOrderKey(r.failed_at, r.dlq_id);
      const byHook = dlqWebhookOrderKey(r.webhook_id, r.failed_at, r.dlq_id);
      wanted.set(JSON.stringify(order), { key: order, value: r.webhook_id });
      wanted.set(JSON.stringify(byHook), { key: byHook, value: null });
    }
    const mutations: Mutation[] = [];
    for (const prefix of [dlqOrderPrefix(), dlqWebhookOrderPrefix()]) {
      const stray = await store.retry(async () => {
        const out: Deno.KvKey[] = [];
        for await (const entry of store.kv.list({ prefix })) {
          const name = JSON.stringify(entry.key);
          if (wanted.has(name) && wanted.get(name)!.value === entry.value) wanted.delete(name);
          else out.push(entry.key);
        }
        return out;
      });
      for (const key of stray) mutations.push({ type: "delete", key, op: 0, primary: false });
    }
    for (const { key, value } of wanted.values()) {
      mutations.push({ type: "set", key, value, op: 0, primary: false });
    }
    await commitInParts(store, mutations, 500);
    const done = await store.retry(() =>
      store.kv.atomic()
        .check({ key: dlqIndexedKey(), versionstamp: null })
        .check({ key: dlqVersionKey(), versionstamp: version.versionstamp })
        .set(dlqCountKey(), new Deno.KvU64(BigInt(records.length)))
        .set(dlqIndexedKey(), true)
        .commit()
    );
    if (done.ok) break;
    if (round >= MAX_DLQ_ROUNDS) {
      throw new GatewayError(
        "UNAVAILABLE",
        `Cannot index the dead-letter queue: writers kept changing it (${round} attempts)`,
      );
    }
  }
  dlqIndexed.add(store);
}

/** Every dead-letter record, in key order. */
export async function listAllDlq(store: DeliveryHandle): Promise<DlqRecord[]> {
  return await store.retry(async () => {
    const out: DlqRecord[] = [];
    for await (const entry of store.kv.list({ prefix: dlqPrefix() })) {
      out.push(parseRecord(DlqRecordSchema, entry.value, `DLQ record ${String(entry.key[2])}`));
    }
    return out;
  });
}

/** Commits unconditional `mutations` in order, `size` per commit (each part atomic, not the whole). */
export async function commitInParts(
  store: DeliveryHandle,
  mutations: readonly Mutation[],
  size: number,
): Promise<void> {
  for (let i = 0; i < mutations.length; i += size) {
    const part = mutations.slice(i, i + size);
    await store.retry(() => {
      const atomic = store.kv.atomic();
      apply(atomic, part);
      return atomic.commit();
    });
  }
}
