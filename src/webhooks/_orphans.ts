/**
 * Deliveries whose event body is missing (as a store defect before issue 33
 * left them): dead-lettered with a reason instead of sent, by the start-up
 * check and wherever a claim meets one. Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { derivedId } from "../ids.ts";
import type {
  DeliveryOp,
  DeliveryRecord,
  DeliveryWriter,
  DlqRecord,
  Store,
  StoredDelivery,
} from "../store/mod.ts";
import type { UndeliverableReason } from "./_dispatch_types.ts";
import type { DlqMirrorWriter } from "./_dlq_mirror_writer.ts";
import { pendingKey } from "./_held.ts";
import type { Lifecycle } from "./_lifecycle.ts";
import type { Problems } from "./_problems.ts";
import type { Registrations } from "./_registrations.ts";

/** What the start-up check found: deliveries whose event body was missing, all dead-lettered. */
export interface OrphanReport {
  /** Dead-lettered with the body recovered from another dead letter of the same event (replayable). */
  recovered: number;
  /** Dead-lettered without a body: nothing kept it, they cannot be replayed. */
  lost: number;
}

/** Options of {@linkcode Orphans}. */
export interface OrphansOptions {
  store: Store;
  /** Writes the dead letters (the dispatcher's delivery writer). */
  writer: DeliveryWriter;
  registrations: Registrations;
  life: Lifecycle;
  problems: Problems;
  mirror: DlqMirrorWriter;
  now: () => number;
  onError: (error: unknown) => void;
  onDeadLetter: ((webhookId: string) => void) | undefined;
  onUndeliverable: ((reason: UndeliverableReason, count: number) => void) | undefined;
}

const encoder = new TextEncoder();

/** Events whose lost deliveries one page of the start-up check dead-letters. */
const ORPHAN_CHECK_PAGE = 256;

/** Pages the start-up check reads at most (a page whose writes fail is read again). */
const ORPHAN_CHECK_MAX_PAGES = 1000;

/** The DLQ id of a delivery dead-lettered for a lost body: the same for every process. */
async function orphanDlqId(record: DeliveryRecord): Promise<string> {
  const seed = new Uint8Array(
    await crypto.subtle.digest(
      "SHA-256",
      encoder.encode(`lost ${record.event_id}/${record.webhook_id}`),
    ),
  );
  return derivedId("dlq", Date.parse(record.created_at) || 0, seed);
}

/** Dead-letters deliveries whose body is lost, once each even when claims and the check meet. */
export class Orphans {
  #store: Store;
  #writer: DeliveryWriter;
  #registrations: Registrations;
  #life: Lifecycle;
  #problems: Problems;
  #mirror: DlqMirrorWriter;
  #now: () => number;
  #onError: (error: unknown) => void;
  #onDeadLetter: ((webhookId: string) => void) | undefined;
  #onUndeliverable: ((reason: UndeliverableReason, count: number) => void) | undefined;
  /** Deliveries being dead-lettered for a missing body (claims and the start-up check meet). */
  #orphaning = new Set<string>();
  #checked: Promise<OrphanReport> | null = null;

  constructor(options: OrphansOptions) {
    this.#store = options.store;
    this.#writer = options.writer;
    this.#registrations = options.registrations;
    this.#life = options.life;
    this.#problems = options.problems;
    this.#mirror = options.mirror;
    this.#now = options.now;
    this.#onError = options.onError;
    this.#onDeadLetter = options.onDeadLetter;
    this.#onUndeliverable = options.onUndeliverable;
  }

  /** The start-up check's report, once it is done (none found when it never ran). */
  whenChecked(): Promise<OrphanReport> {
    return this.#checked ?? Promise.resolve({ recovered: 0, lost: 0 });
  }

  /** Starts the start-up check (see {@linkcode Orphans.whenChecked}). */
  check(): Promise<OrphanReport> {
    const checked = this.#check();
    this.#checked = checked;
    return checked;
  }

  /**
   * The start-up check: dead-letters every pending delivery whose event body
   * is missing (as a store defect before issue 33 left them), a page of
   * events at a time, and says what it found.
   */
  async #check(): Promise<OrphanReport> {
    const report: OrphanReport = { recovered: 0, lost: 0 };
    for (let page = 0; page < ORPHAN_CHECK_MAX_PAGES && this.#life.running; page++) {
      const orphans = await this.#store.deliveries.listOrphans(ORPHAN_CHECK_PAGE);
      if (!orphans.length) break;
      const byEvent = new Map<string, StoredDelivery[]>();
      for (const stored of orphans) {
        const group = byEvent.get(stored.record.event_id);
        if (group) group.push(stored);
        else byEvent.set(stored.record.event_id, [stored]);
      }
      for (const [eventId, group] of byEvent) {
        const { recovered, count } = await this.deadLetter(eventId, group);
        if (recovered) report.recovered += count;
        else report.lost += count;
      }
    }
    if (report.recovered || report.lost) {
      this.#onError(
        new GatewayError(
          "STORE_CORRUPT",
          `Start-up check: ${report.recovered + report.lost} pending deliveries had lost their ` +
            `event's body and were moved to the dead-letter queue: ${report.recovered} with the ` +
            `body recovered from another dead letter of the same event (\`toolgate dlq replay\` ` +
            `sends them), ${report.lost} without a body (nothing kept it; they cannot be replayed)`,
          { details: report },
        ),
      );
    }
    return report;
  }

  /**
   * Dead-letters deliveries whose event's stored body is missing, with a
   * reason, instead of sending them: the body comes from another dead letter
   * of the same event where one keeps it, else the record says it is lost.
   * Their DLQ ids derive from event and webhook, so two instances meeting
   * the same deliveries write one record each. Counted, reported by
   * `problems()` and logged at error level.
   */
  async deadLetter(
    eventId: string,
    group: StoredDelivery[],
  ): Promise<{ recovered: boolean; count: number }> {
    const fresh = group.filter((d) => !this.#orphaning.has(pendingKey(d.record)));
    if (!fresh.length) return { recovered: false, count: 0 };
    for (const d of fresh) this.#orphaning.add(pendingKey(d.record));
    try {
      const body = await this.#store.deliveries.findDlqBody(eventId);
      const failedAt = new Date(this.#now()).toISOString();
      const reason = "Not sent: the event's stored body was deleted while this delivery was " +
        "pending (a store defect fixed in issue 33); " +
        (body
          ? "the body was recovered from another dead letter of the same event"
          : "no copy of the body was kept, so it cannot be replayed");
      const ops: DeliveryOp[] = [];
      const dead: DlqRecord[] = [];
      for (const { record } of fresh) {
        // A replay keeps the id of the record it replays (which holds the body).
        const dlqId = record.dlq_id ?? await orphanDlqId(record);
        const dlq: Omit<DlqRecord, "size" | "body"> = {
          dlq_id: dlqId,
          webhook_id: record.webhook_id,
          url: this.#registrations.get(record.webhook_id)?.record.url ?? "",
          event_id: record.event_id,
          event_type: record.event_type,
          attempts: record.attempts,
          reason,
          failed_at: failedAt,
          ...(body ? {} : { body_lost: true as const }),
        };
        ops.push({ op: "put_dlq", record: dlq, body: body ?? new Uint8Array(0) });
        dead.push({ ...dlq, size: body?.byteLength ?? 0 });
      }
      for (const { record } of fresh.filter((d) => !d.fanout)) {
        ops.push({
          op: "delete_delivery",
          event_id: record.event_id,
          webhook_id: record.webhook_id,
        });
      }
      const fanout = fresh.find((d) => d.fanout)?.record;
      if (fanout) {
        const { event_type, created_at, next_attempt_at } = fanout;
        ops.push({
          op: "put_fanout",
          event_id: eventId,
          fanout: { event_type, created_at, next_attempt_at, webhook_ids: [] },
        });
      }
      await this.#writer.write(ops);
      this.#onUndeliverable?.("body_missing", fresh.length);
      for (const d of dead) this.#onDeadLetter?.(d.webhook_id);
      this.#problems.note(
        "DELIVERY_BODY_MISSING",
        (count) =>
          `${count} pending deliveries had lost their event's stored body and were ` +
          `moved to the dead-letter queue (\`toolgate dlq list\`)`,
        fresh.length,
      );
      this.#onError(
        new GatewayError(
          "STORE_CORRUPT",
          `Cannot deliver event ${eventId}: its stored body is missing; ${fresh.length} ` +
            `delivery record(s) moved to the dead-letter queue ` +
            (body ? "with the body of another dead letter of the event" : "without a body"),
          { details: { event_id: eventId, dlq_ids: dead.map((d) => d.dlq_id) } },
        ),
      );
      this.#mirror.rewrite();
      return { recovered: body !== null, count: fresh.length };
    } finally {
      for (const d of fresh) this.#orphaning.delete(pendingKey(d.record));
    }
  }
}
