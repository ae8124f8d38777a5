/**
 * Delivery ops refused before PostgreSQL writes them: those that would store
 * what cannot be read back, and a `collect_event` inside another commit.
 *
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../../errors/mod.ts";
import {
  BytesSchema,
  DeliveryLogEntrySchema,
  type DeliveryOp,
  DeliveryRecordSchema,
  DlqRecordSchema,
  FanoutRecordSchema,
} from "../records.ts";

const OutboxEventSchema = z.object({
  id: z.string(),
  type: z.string(),
  timestamp: z.string(),
  body: BytesSchema,
  traceparent: z.string().optional(),
});

const DeliveryOpSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("put_event"), event: OutboxEventSchema }),
  z.object({ op: z.literal("put_delivery"), delivery: DeliveryRecordSchema }),
  z.object({ op: z.literal("delete_delivery"), event_id: z.string(), webhook_id: z.string() }),
  z.object({
    op: z.literal("put_fanout"),
    event_id: z.string(),
    fanout: FanoutRecordSchema.extend({ webhook_ids: z.array(z.string()) }),
    claim: z.object({ owner: z.string().min(1), until: z.number() }).optional(),
  }),
  z.object({
    op: z.literal("log"),
    webhook_id: z.string(),
    entry_id: z.string(),
    entry: DeliveryLogEntrySchema,
  }),
  z.object({ op: z.literal("delete_log"), webhook_id: z.string(), entry_id: z.string() }),
  z.object({
    op: z.literal("put_dlq"),
    record: DlqRecordSchema.omit({ size: true, body: true }),
    body: BytesSchema,
  }),
  z.object({ op: z.literal("delete_dlq"), dlq_id: z.string() }),
  z.object({
    op: z.literal("collect_event"),
    event_id: z.string(),
    versionstamp: z.string(),
  }),
]);

/**
 * Rejects ops that would store what cannot be read back: the rows would
 * otherwise fail every later read of the outbox.
 *
 * @throws {GatewayError} `INTERNAL` naming the first bad op.
 */
export function checkOps(ops: readonly DeliveryOp[]): void {
  for (const [index, op] of ops.entries()) {
    const parsed = DeliveryOpSchema.safeParse(op);
    if (parsed.success) continue;
    const issue = parsed.error.issues[0];
    const kind = String(op?.op);
    const where = issue?.path.length ? ` at ${issue.path.join(".")}` : "";
    throw new GatewayError(
      "INTERNAL",
      `Cannot write delivery ops: op ${index} (${kind}) is invalid${where}: ${issue?.message}`,
    );
  }
}

export function refuseCollect(ops: readonly DeliveryOp[]): void {
  if (ops.some((op) => op.op === "collect_event")) {
    throw new GatewayError("INTERNAL", "Cannot write a collect_event op inside another commit");
  }
}
