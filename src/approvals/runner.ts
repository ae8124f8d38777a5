/**
 * A server's runner of approved calls: a call held for another's approval
 * whose caller stopped waiting (REST 202, a request that ended, a restart)
 * runs here once approved — on whichever instance claims it first — and
 * its outcome is kept in the approval (`GET /approvals/<id>`). It also
 * expires the pending approvals whose time passed.
 *
 * @module
 */
import { keyCaller } from "../auth/api_keys.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller, Gateway } from "../gateway/mod.ts";
import type { ApprovalRecord, Store } from "../store/mod.ts";
import type { Approvals } from "./approvals.ts";

/** Options of {@linkcode runApprovedCalls}. */
export interface ApprovedCallRunnerOptions {
  approvals: Approvals;
  gateway: Gateway;
  store: Store;
  /** How often it looks, in ms. */
  pollMs: number;
  log?: (message: string) => void;
}

/**
 * The caller an approval was made for, with its rights as they are now (an
 * API key revoked meanwhile has none: the call is refused).
 */
async function callerOf(store: Store, record: ApprovalRecord): Promise<Caller | undefined> {
  const kind = String(record.caller.kind ?? "local");
  if (kind === "local" || kind === "admin") return { kind };
  if (kind === "key") {
    const key = await store.apiKeys.get(String(record.caller.id));
    return key ? keyCaller(key) : undefined;
  }
  // An OAuth caller's token is not kept: it runs with the rights the approval records.
  return {
    kind: "oauth",
    ...(record.caller.id ? { id: String(record.caller.id) } : {}),
    ...(record.caller.name ? { name: String(record.caller.name) } : {}),
    ...(record.server ? { server: record.server } : {}),
  };
}

/** Starts the runner. @returns Stops it (waiting for a call it runs). */
export function runApprovedCalls(options: ApprovedCallRunnerOptions): () => Promise<void> {
  const { approvals, gateway, store, pollMs, log = () => {} } = options;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  const runOne = async (record: ApprovalRecord) => {
    const claimed = await approvals.claim(record);
    if (!claimed) return;
    const caller = await callerOf(store, claimed);
    if (!caller) {
      await approvals.finish(claimed, {
        error: new GatewayError(
          "FORBIDDEN",
          `The API key the approval was for is gone: approval ${claimed.id} does not run`,
        ),
      });
      return;
    }
    try {
      // The gateway checks the approval against the call and records the outcome in it.
      await gateway.call(claimed.tool, claimed.args, {
        caller,
        source: claimed.transport,
        approval: claimed,
      });
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      // Refused before it ran (the policy changed, the tool is gone): no outcome was recorded.
      const current = await approvals.get(claimed.id);
      if (current && !current.ran) await approvals.finish(current, { error });
    }
  };
  const tick = async () => {
    try {
      for (const record of await approvals.sweep()) {
        if (stopped) return;
        await runOne(record);
      }
    } catch (error) {
      log(`approvals: ${(error as Error).message}`);
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick().finally(() => {
        running = undefined;
        schedule();
      });
    }, pollMs);
  };
  schedule();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}
