/**
 * The per-call CPU of the gateway's call path in another checkout, measured
 * by this one: the runtime (store, audit log, dispatcher, plugins, gateway)
 * is composed by `--code=<checkout>`'s own `createRuntime` on a Deno KV
 * file in a temp dir, and this file drives `gateway.call("memory_get")`
 * from 64 concurrent callers (each call durably audited) and reads the
 * process's CPU time around it. No HTTP and no other process: what differs
 * between two runs is the code under test, so a before/after run
 * (`gateway_before`) sees changes of a few µs that the servers' runs
 * (`policy_cost`, `mcp_before`) lose in their noise.
 *
 * Run alone: `deno run -A scripts/bench/gateway_code.ts [--quick] [--code=<checkout>]`
 * prints JSON.
 *
 * @module
 */
import { ROOT } from "./_proc.ts";
import { round3 } from "./_stats.ts";

/** Figures of one run. */
export interface GatewayCodeResult {
  /** Calls answered per second by 64 concurrent callers. */
  calls_per_s: number;
  /** CPU time of the process (every thread) per call, in µs. */
  cpu_us_per_call: number;
}

interface Runtime {
  gateway: {
    call(name: string, args: unknown, options: Record<string, unknown>): Promise<unknown>;
  };
  close(): Promise<void>;
}

interface Code {
  context(env: Record<string, string>): { close(): Promise<void> };
  createRuntime(context: unknown, options: Record<string, unknown>): Promise<Runtime>;
}

async function load(root: string): Promise<Code> {
  const base = root.endsWith("/") ? root : `${root}/`;
  const { CliContext } = await import(`${base}src/cli/context.ts`);
  const { createRuntime } = await import(`${base}src/cli/runtime.ts`);
  return {
    context: (env) =>
      new CliContext({
        stdout: () => {},
        stderr: (text: string) => Deno.stderr.writeSync(new TextEncoder().encode(text)),
        readStdin: () => Promise.resolve(""),
        env,
        stderrIsTty: false,
        stdinIsTty: false,
        readSecret: () => Promise.resolve(""),
      }),
    createRuntime,
  };
}

function cpuMicros(): number {
  const { user, system } = (globalThis as unknown as {
    process: { cpuUsage(): { user: number; system: number } };
  }).process.cpuUsage();
  return user + system;
}

/** `memory_get` from `workers` concurrent callers for `durationMs`, after a warm-up. */
export async function gatewayCallCost(
  root: string,
  { workers = 64, durationMs = 3000 }: { workers?: number; durationMs?: number } = {},
): Promise<GatewayCodeResult> {
  const code = await load(root);
  const home = await Deno.makeTempDir({ prefix: "toolgate-bench-gateway-code-" });
  const context = code.context({
    TOOLGATE_HOME: home,
    TOOLGATE_KEYCHAIN: "file",
    PATH: Deno.env.get("PATH") ?? "",
  });
  const runtime = await code.createRuntime(context, { role: "server", transport: "http" });
  try {
    const args = { key: "bench/missing-key" };
    let calls = 0;
    const run = async (ms: number) => {
      const end = performance.now() + ms;
      await Promise.all(Array.from({ length: workers }, async () => {
        while (performance.now() < end) {
          await runtime.gateway.call("memory_get", args, { source: "api" });
          calls++;
        }
      }));
    };
    await run(Math.min(1000, durationMs / 2));
    calls = 0;
    const cpuBefore = cpuMicros();
    const started = performance.now();
    await run(durationMs);
    const elapsed = performance.now() - started;
    const cpu = cpuMicros() - cpuBefore;
    return {
      calls_per_s: Math.round(calls / (elapsed / 1000)),
      cpu_us_per_call: round3(cpu / calls),
    };
  } finally {
    await runtime.close();
    await context.close();
    await Deno.remove(home, { recursive: true });
  }
}

if (import.meta.main) {
  const codeArg = Deno.args.find((arg) => arg.startsWith("--code="));
  const root = codeArg ? codeArg.slice("--code=".length) : ROOT;
  const durationMs = Deno.args.includes("--quick") ? 1500 : 3000;
  console.log(JSON.stringify(await gatewayCallCost(root, { durationMs })));
}
