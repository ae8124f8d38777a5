/**
 * `toolgate incoming failed …`: inspect, replay and purge failed incoming
 * jobs (payloads whose handler call failed for good).
 *
 * @module
 */
import type { Command } from "commander";
import {
  type FailedJobView,
  listFailedJobs,
  purgeFailedJobs,
  replayFailedJobs,
  showFailedJob,
} from "../webhooks/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

/** The last attempt of a failed job as one cell: code and message, shortened. */
function lastError(job: FailedJobView): string {
  const last = job.attempts.at(-1);
  if (!last) return "";
  const text = `${last.code}: ${last.message}`;
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function parseTime(flag: string, raw: string): Date {
  const time = new Date(raw);
  if (Number.isNaN(time.getTime())) {
    throw usage(`Invalid ${flag} "${raw}": expected an ISO time, e.g. 2026-11-01T00:00:00Z`);
  }
  return time;
}

/** Registers the `incoming` command group. */
export function registerIncoming(program: Command, context: CliContext): void {
  const incoming = program.command("incoming")
    .description("incoming webhook payloads: failed jobs");
  const failed = incoming.command("failed")
    .description(
      "payloads whose handler call failed for good (an input error, or after 5 retries)",
    );

  failed.command("list")
    .description("list failed jobs, oldest first")
    .option("--endpoint <in_id>", "only this incoming endpoint's")
    .option("--json", "print the jobs as JSON")
    .action(async (options: { endpoint?: string; json?: boolean }) => {
      const jobs = await listFailedJobs(await context.store(), { endpoint: options.endpoint });
      if (options.json) {
        context.printJson(jobs);
        return;
      }
      if (!jobs.length) {
        context.print("No failed incoming jobs.");
        return;
      }
      context.print(table(
        ["JOB ID", "FAILED AT", "ENDPOINT", "HANDLER", "ATTEMPTS", "LAST ERROR"],
        jobs.map((job) => [
          job.id,
          job.failed_at,
          job.endpoint_path ? `${job.endpoint_id} ${job.endpoint_path}` : job.endpoint_id,
          job.handler,
          String(job.attempts.length),
          lastError(job),
        ]),
      ));
    });

  failed.command("show")
    .description("show a failed job: endpoint, handler, arguments and every attempt")
    .argument("<job_id>", "the failed job (inj_…)")
    .option("--json", "print the job as JSON")
    .action(async (jobId: string, options: { json?: boolean }) => {
      const job = await showFailedJob(await context.store(), jobId);
      if (options.json) {
        context.printJson(job);
        return;
      }
      context.print(
        `${job.id}  failed ${job.failed_at}\n` +
          `endpoint: ${job.endpoint_id}${job.endpoint_path ? ` ${job.endpoint_path}` : ""}\n` +
          `handler: ${job.handler}\n` +
          `received: ${job.received_at}\n` +
          `arguments: ${JSON.stringify(job.arguments)}\n` +
          `attempts:`,
      );
      for (const [i, attempt] of job.attempts.entries()) {
        context.print(
          `  ${i + 1}. ${attempt.at}  ${attempt.code}: ${attempt.message}` +
            (attempt.fields ? ` (fields: ${attempt.fields.join(", ")})` : ""),
        );
      }
    });

  failed.command("replay")
    .description(
      "queue failed jobs again with a fresh retry schedule (same job id and arguments)",
    )
    .argument("[job_id]", "the failed job to replay")
    .option("--endpoint <in_id>", "replay every failed job of this endpoint")
    .option("--all", "replay every failed job")
    .option("--json", "print the result as JSON")
    .action(
      async (
        jobId: string | undefined,
        options: { endpoint?: string; all?: boolean; json?: boolean },
      ) => {
        const given = [jobId !== undefined, options.endpoint !== undefined, options.all === true]
          .filter(Boolean).length;
        if (given === 0) {
          throw usage("Missing <job_id>: give a failed job id, --endpoint <in_id> or --all");
        }
        if (given > 1) {
          throw usage("Invalid arguments: give only one of <job_id>, --endpoint <in_id> or --all");
        }
        const result = await replayFailedJobs(
          await context.store(),
          options.all
            ? "all"
            : options.endpoint !== undefined
            ? { endpoint: options.endpoint }
            : jobId!,
        );
        if (options.json) {
          context.printJson(result);
          return;
        }
        context.print(
          `Queued ${result.replayed.length} failed job(s) again. A running server runs them ` +
            "within a second (or on its next start), retrying on the usual schedule.",
        );
      },
    );

  failed.command("purge")
    .description("delete failed jobs: all, or those that failed before a time")
    .option("--before <time>", "only jobs that failed before this ISO time")
    .action(async (options: { before?: string }) => {
      const before = options.before === undefined
        ? undefined
        : parseTime("--before", options.before);
      const count = await purgeFailedJobs(await context.store(), { before });
      context.print(`Purged ${count} failed job(s)`);
    });
}
