/**
 * `toolgate dlq …`: inspect, replay and purge the dead-letter queue.
 *
 * @module
 */
import type { Command } from "commander";
import { listDlq, purgeDlq, replayDlq, type ReplayTarget } from "../webhooks/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

/** Registers the `dlq` command group. */
export function registerDlq(program: Command, context: CliContext): void {
  const dlq = program.command("dlq")
    .description("dead-letter queue: events whose delivery failed after every retry");

  dlq.command("list")
    .description(
      "list dead-lettered deliveries, oldest failure first (mirrored in <data_dir>/dlq.json)",
    )
    .option("--json", "print the records as JSON")
    .action(async (options: { json?: boolean }) => {
      const entries = await listDlq(await context.store());
      if (options.json) {
        context.printJson(entries);
        return;
      }
      if (entries.length === 0) {
        context.print("The dead-letter queue is empty.");
        return;
      }
      context.print(table(
        ["DLQ ID", "FAILED AT", "WEBHOOK", "EVENT", "ATTEMPTS", "LAST RESULT"],
        entries.map((entry) => {
          const last = entry.attempts.at(-1);
          return [
            entry.dlq_id,
            entry.failed_at,
            `${entry.webhook_id} ${entry.url}`,
            `${entry.event.type} ${entry.event.id}`,
            String(entry.attempts.length),
            entry.reason ??
              (last
                ? (last.status !== undefined ? `HTTP ${last.status}` : String(last.error))
                : ""),
          ];
        }),
      ));
    });

  dlq.command("replay")
    .description("queue dead-lettered events again with a fresh retry schedule (same event id)")
    .argument("[dlq_id]", "the record to replay")
    .option("--all", "replay every record")
    .option("--webhook <id>", "replay every record of this webhook (after `webhooks enable`)")
    .option("--since <time>", "with --webhook: only records that failed at or after this ISO time")
    .option("--json", "print the result as JSON")
    .action(
      async (
        dlqId: string | undefined,
        options: { all?: boolean; webhook?: string; since?: string; json?: boolean },
      ) => {
        const given = [dlqId !== undefined, options.all === true, options.webhook !== undefined]
          .filter(Boolean).length;
        if (given === 0) throw usage("Missing <dlq_id>: give a DLQ id, --webhook <id> or --all");
        if (given > 1) {
          throw usage("Invalid arguments: give only one of <dlq_id>, --webhook <id> or --all");
        }
        if (options.since !== undefined && options.webhook === undefined) {
          throw usage("Invalid --since: it applies to --webhook <id>; add --webhook");
        }
        if (options.since !== undefined && Number.isNaN(Date.parse(options.since))) {
          throw usage(
            `Invalid --since "${options.since}": expected an ISO time, e.g. 2026-11-01T00:00:00Z`,
          );
        }
        const many = options.all === true || options.webhook !== undefined;
        const showProgress = many && context.io.stderrIsTty && !context.io.env.NO_COLOR;
        const target: ReplayTarget = options.webhook !== undefined
          ? { webhook: options.webhook, since: options.since }
          : options.all
          ? "all"
          : dlqId!;
        const result = await replayDlq(await context.store(), target, {
          onProgress: showProgress
            ? (done, total) => context.io.stderr(`\rreplaying ${done}/${total}`)
            : undefined,
        });
        if (showProgress) context.io.stderr("\n");
        if (options.json) {
          context.printJson(result);
          return;
        }
        context.print(
          `Queued ${result.queued.length} event(s) for delivery` +
            (result.already_queued.length
              ? `, ${result.already_queued.length} already queued`
              : "") +
            (result.skipped.length ? `, ${result.skipped.length} skipped` : "") +
            ". A running server delivers them within a second (or on its next start); " +
            "each record leaves the queue once delivered.",
        );
        for (const skipped of result.skipped) {
          context.warn(`skipped ${skipped.dlq_id}: ${skipped.reason}`);
        }
      },
    );

  dlq.command("purge")
    .description("delete dead-letter records")
    .option("--before <time>", "only records that failed before this ISO time")
    .action(async (options: { before?: string }) => {
      let before: Date | undefined;
      if (options.before !== undefined) {
        before = new Date(options.before);
        if (Number.isNaN(before.getTime())) {
          throw usage(
            `Invalid --before "${options.before}": expected an ISO time, e.g. 2026-11-01T00:00:00Z`,
          );
        }
      }
      const count = await purgeDlq(await context.store(), { before });
      context.print(`Purged ${count} dead-letter record(s)`);
    });
}
