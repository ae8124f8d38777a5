/**
 * `toolgate doctor` checks a setup the way a support engineer would, one
 * line per check with the fix, and prints a working MCP host entry;
 * `toolgate config validate [file]` checks a configuration file alone.
 * Neither changes anything the checks look at (the store is opened, which
 * fixes a data directory's modes, as every command does, after they are read).
 *
 * @module
 */
import type { Command } from "commander";
import { type Config, loadConfig } from "../config/mod.ts";
import { egressPolicyFromConfig } from "../egress/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { type Store, storeSchemaStatus } from "../store/mod.ts";
import { VERSION } from "../version.ts";
import { type CliContext, storeOptions } from "./context.ts";
import { describeKey } from "./db.ts";
import { startQuietRuntime } from "./tools.ts";

/** How a check came out. */
export type CheckStatus = "ok" | "warn" | "fail";

/** One check's line. */
export interface DoctorCheck {
  /** What was checked: `config`, `data_dir`, `store`, `key`, `upstream:<name>`, `webhook:<id>`, `port`, `network`. */
  name: string;
  status: CheckStatus;
  /** What was found. */
  message: string;
  /** What to do, when not ok. */
  fix?: string;
}

/** Proxy and CA variables the runtime honours. */
const NETWORK_VARIABLES = [
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "ALL_PROXY",
  "NO_PROXY",
  "no_proxy",
  "DENO_CERT",
  "DENO_TLS_CA_STORE",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
];

/** How long doctor waits for upstreams to connect. */
const UPSTREAM_WAIT_MS = 15_000;

function failed(name: string, error: unknown, fix: string): DoctorCheck {
  const message = error instanceof GatewayError
    ? `${error.code}: ${error.message}`
    : (error as Error).message;
  return { name, status: "fail", message, fix };
}

async function checkDataDir(dataDir: string): Promise<DoctorCheck> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(dataDir);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      return { name: "data_dir", status: "ok", message: `${dataDir} (made at first use)` };
    }
    return failed("data_dir", error, `check that ${dataDir} can be read by this user`);
  }
  if (!info.isDirectory) {
    return {
      name: "data_dir",
      status: "fail",
      message: `${dataDir} is not a directory`,
      fix: "set TOOLGATE_HOME to a directory",
    };
  }
  if (Deno.build.os === "windows" || info.mode === null) {
    return { name: "data_dir", status: "ok", message: dataDir };
  }
  const open: string[] = [];
  if (info.mode & 0o077) open.push(`${dataDir} (mode ${(info.mode & 0o777).toString(8)})`);
  for await (const entry of Deno.readDir(dataDir)) {
    if (!entry.isFile) continue;
    const mode = (await Deno.stat(`${dataDir}/${entry.name}`)).mode ?? 0;
    if (mode & 0o077) open.push(`${entry.name} (mode ${(mode & 0o777).toString(8)})`);
  }
  if (info.uid !== null && Deno.uid() !== null && info.uid !== Deno.uid()) {
    return {
      name: "data_dir",
      status: "fail",
      message: `${dataDir} belongs to uid ${info.uid}, not to this user (uid ${Deno.uid()})`,
      fix:
        `sudo chown -R ${Deno.uid()} ${dataDir}, or set TOOLGATE_HOME to a directory of your own`,
    };
  }
  return open.length
    ? {
      name: "data_dir",
      status: "warn",
      message: `${dataDir}: readable by other users: ${open.join(", ")}`,
      fix: "toolgate makes them private (0700/0600) whenever it opens the store",
    }
    : { name: "data_dir", status: "ok", message: `${dataDir} (private)` };
}

async function checkStore(config: Config): Promise<DoctorCheck[]> {
  let status;
  try {
    status = await storeSchemaStatus(storeOptions(config));
  } catch (error) {
    return [
      failed(
        "store",
        error,
        config.store.url
          ? "start the database, or check TOOLGATE_DATABASE_URL / store.url (user, password, host, port)"
          : "see docs/troubleshooting.md; restore the data directory from a backup if it is damaged",
      ),
    ];
  }
  const what = status.kind === "kv" ? "Deno KV" : "PostgreSQL";
  const checks: DoctorCheck[] = [];
  if (status.current > status.latest) {
    checks.push({
      name: "store",
      status: "fail",
      message:
        `${what} at ${status.location}: migrated by a newer toolgate (schema ${status.current})`,
      fix: "upgrade toolgate",
    });
  } else if (status.pending.length) {
    checks.push({
      name: "store",
      status: "warn",
      message: `${what} at ${status.location}: ${status.pending.length} migration(s) pending`,
      fix: "run toolgate db migrate, or start a server (it migrates)",
    });
  } else {
    checks.push({
      name: "store",
      status: "ok",
      message: `${what} at ${status.location}, schema ${status.current}`,
    });
  }
  if (status.key) {
    const bad = status.key.state === "mismatch" || status.key.state === "no_key";
    checks.push({
      name: "key",
      status: bad ? "fail" : "ok",
      message: describeKey(status.key),
      ...(bad
        ? {
          fix: "give this process the store's key: TOOLGATE_SECRET_KEY (the base64 of the " +
            "keychain.key that sealed the secrets) or that keychain.key in the data directory",
        }
        : {}),
    });
  }
  return checks;
}

async function checkWebhooks(config: Config, store: Store): Promise<DoctorCheck[]> {
  const egress = egressPolicyFromConfig(config, { marker: await store.deploymentId() });
  const checks: DoctorCheck[] = [];
  for (const hook of await store.webhooks.listOutgoing({ unreadableSecrets: "report" })) {
    const name = `webhook:${hook.id}`;
    if (hook.secret_error) {
      checks.push({
        name,
        status: "fail",
        message: `${hook.url}: ${hook.secret_error}`,
        fix: "give this process the store's secret key (see the key check)",
      });
      continue;
    }
    try {
      await egress.resolve(new URL(hook.url), "public");
      checks.push({
        name,
        status: hook.disabled ? "warn" : "ok",
        message: hook.disabled
          ? `${hook.url}: disabled (${hook.disabled.reason})`
          : `${hook.url}: allowed by the egress policy`,
        ...(hook.disabled ? { fix: `toolgate webhooks enable ${hook.id}` } : {}),
      });
    } catch (error) {
      checks.push(
        failed(
          name,
          error,
          error instanceof GatewayError && error.code === "EGRESS_DENIED"
            ? "allow the host with egress.allow / TOOLGATE_EGRESS_ALLOW, or change the URL"
            : "check the host name (DNS) and the URL",
        ),
      );
    }
  }
  return checks;
}

async function checkUpstreams(context: CliContext, config: Config): Promise<DoctorCheck[]> {
  let runtime;
  try {
    runtime = await startQuietRuntime(context);
  } catch (error) {
    return [failed("plugins", error, "fix what the message names, then run doctor again")];
  }
  try {
    const deadline = Date.now() + UPSTREAM_WAIT_MS;
    const starting = () =>
      runtime.gateway.listPlugins().some((p) =>
        p.upstream && (p.state === "initializing" || p.state === "reconnecting")
      );
    while (starting() && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const checks: DoctorCheck[] = [];
    for (const plugin of runtime.gateway.listPlugins()) {
      if (!plugin.upstream) continue;
      const name = `upstream:${plugin.name}`;
      if (plugin.state === "ready") {
        checks.push({
          name,
          status: "ok",
          message: `${plugin.upstream.transport} upstream connected, ${plugin.tool_count} tool(s)`,
        });
      } else if (plugin.state === "disabled") {
        checks.push({ name, status: "ok", message: "disabled" });
      } else {
        checks.push({
          name,
          status: "fail",
          message: `${plugin.state}${plugin.error ? `: ${plugin.error}` : ""}`,
          fix: Object.hasOwn(config.plugins.upstreams, plugin.name)
            ? `check plugins.upstreams.${plugin.name} in config.json (command, url, headers)`
            : `check toolgate plugins list; toolgate plugins remove ${plugin.name} if it is gone`,
        });
      }
    }
    return checks;
  } finally {
    await runtime.close();
  }
}

async function checkPort(config: Config): Promise<DoctorCheck> {
  const { host, port } = config.server;
  try {
    const listener = Deno.listen({ hostname: host, port });
    listener.close();
    return { name: "port", status: "ok", message: `${host}:${port} is free for --transport http` };
  } catch (error) {
    if (!(error instanceof Deno.errors.AddrInUse)) {
      return failed("port", error, "pick another with --port or TOOLGATE_PORT");
    }
  }
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  try {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
    const body = await response.json().catch(() => ({}));
    if (typeof body?.version === "string" && Array.isArray(body?.plugins)) {
      return {
        name: "port",
        status: "ok",
        message: `${host}:${port} is served by toolgate ${body.version} (status ${body.status})`,
      };
    }
  } catch {
    // Not an HTTP server that answers /health: something else.
  }
  return {
    name: "port",
    status: "fail",
    message: `${host}:${port} is in use by another program`,
    fix: "stop it, or pick another port with --port <n> or TOOLGATE_PORT",
  };
}

function checkNetwork(env: Record<string, string>): DoctorCheck {
  const set = NETWORK_VARIABLES.filter((name) => env[name]);
  const shown = set.map((name) => `${name}=${env[name].replace(/\/\/[^@/]*@/, "//***@")}`);
  return {
    name: "network",
    status: "ok",
    message: set.length ? shown.join(" ") : "no proxy or CA variables set (direct connections)",
  };
}

/** A working MCP host entry for this installation. */
export function mcpHostEntry(dataDir: string): Record<string, unknown> {
  const main = Deno.mainModule.startsWith("file://")
    ? new URL(Deno.mainModule).pathname
    : Deno.mainModule;
  const compiled = !/deno(\.exe)?$/.test(Deno.execPath());
  return {
    mcpServers: {
      toolgate: {
        command: Deno.execPath(),
        args: compiled ? ["mcp", "start"] : ["run", "-A", main, "mcp", "start"],
        env: { TOOLGATE_HOME: dataDir },
      },
    },
  };
}

/** Runs every check. */
export async function runDoctor(context: CliContext): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  let config: Config;
  try {
    config = await context.config();
    checks.push({ name: "config", status: "ok", message: `${configSource(context)} is valid` });
  } catch (error) {
    checks.push(failed("config", error, "fix the key it names (docs/configuration.md)"));
    checks.push(checkNetwork(context.io.env));
    return checks;
  }
  checks.push(await checkDataDir(config.dataDir));
  const storeChecks = await checkStore(config);
  checks.push(...storeChecks);
  if (!storeChecks.some((check) => check.name === "store" && check.status === "fail")) {
    try {
      checks.push(...await checkWebhooks(config, await context.store()));
      checks.push(...await checkUpstreams(context, config));
    } catch (error) {
      checks.push(failed("store", error, "see docs/troubleshooting.md"));
    }
  }
  checks.push(await checkPort(config));
  checks.push(checkNetwork(context.io.env));
  return checks;
}

function configSource(context: CliContext): string {
  const named = context.io.env.TOOLGATE_CONFIG;
  return named ? `TOOLGATE_CONFIG=${named}` : "config.json (or its absence)";
}

const LABELS: Readonly<Record<CheckStatus, string>> = { ok: "ok  ", warn: "warn", fail: "FAIL" };

/** Registers `doctor` and `config validate`. */
export function registerDoctor(program: Command, context: CliContext): void {
  program.command("doctor")
    .description(
      "check this setup (config, data dir, store and key, upstreams, webhooks, port, proxies) " +
        "and print a working MCP host entry; exit 1 when a check fails",
    )
    .option(
      "--json",
      "print {version, ok, checks: [{name, status, message, fix?}], mcp_host_entry}",
    )
    .action(async (options: { json?: boolean }) => {
      const checks = await runDoctor(context);
      const ok = checks.every((check) => check.status !== "fail");
      const dataDir = (await context.config().catch(() => undefined))?.dataDir;
      const entry = dataDir ? mcpHostEntry(dataDir) : undefined;
      if (options.json) {
        context.printJson({ version: VERSION, ok, checks, mcp_host_entry: entry ?? null });
      } else {
        const width = Math.max(...checks.map((check) => check.name.length));
        for (const check of checks) {
          context.print(
            `${LABELS[check.status]}  ${check.name.padEnd(width)}  ${check.message}` +
              (check.fix ? `\n${" ".repeat(width + 8)}fix: ${check.fix}` : ""),
          );
        }
        if (entry) {
          context.print("");
          context.print("MCP host entry (Claude Desktop, Cursor, VS Code):");
          context.print(JSON.stringify(entry, null, 2));
        }
      }
      if (!ok) {
        throw new GatewayError(
          checks.find((check) => check.status === "fail")!.name === "config"
            ? "CONFIG_INVALID"
            : "UNAVAILABLE",
          `${checks.filter((check) => check.status === "fail").length} check(s) failed: ${
            checks.filter((check) => check.status === "fail").map((check) => check.name).join(", ")
          }`,
        );
      }
    });

  const config = program.command("config").description("the configuration file");
  config.command("validate")
    .argument("[file]", "the file to check (default: TOOLGATE_CONFIG, else <data_dir>/config.json)")
    .description("check a configuration file (and the TOOLGATE_* variables) without starting")
    .option("--json", "print {valid, file, error?}")
    .action(async (file: string | undefined, options: { json?: boolean }) => {
      const env = { ...context.io.env, ...(file ? { TOOLGATE_CONFIG: file } : {}) };
      const path = env.TOOLGATE_CONFIG || undefined;
      try {
        const loaded = await loadConfig({ env });
        const shown = path ?? `${loaded.dataDir}/config.json`;
        if (options.json) context.printJson({ valid: true, file: shown });
        else context.print(`${shown} is valid`);
      } catch (error) {
        if (options.json && error instanceof GatewayError) {
          context.printJson({ valid: false, file: path ?? null, error: error.toJSON() });
        }
        throw error;
      }
    });
}
