/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`,
 * pinned and locked in `scripts/npm_servers/`) against the real HTTP server,
 * with two unprefixed upstreams: the reference "everything" server and a
 * fixture offering what the suite's scenarios call by name
 * (`tests/plugins/_fixtures/conformance_upstream.ts`), for each scenario at
 * each revision it applies to. Which scenarios apply to a gateway,
 * and why the others do not yet: docs/conformance.md.
 *
 * @module
 */
import { assertEquals } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import {
  conformanceFixtureCommand,
  EVERYTHING_PACKAGE,
  npmCommand,
} from "../plugins/_upstreams.ts";
import { NPM_SERVERS_CONFIG } from "../../scripts/npm_servers.ts";
import { startHttpServer } from "./_http_server.ts";

const CONFORMANCE = "npm:@modelcontextprotocol/conformance@0.2.0-alpha.12";

/**
 * Scenario → the revisions it is run at → the check ids expected to fail
 * (each needs a diagnostic tool of the suite's own test server; see
 * docs/conformance.md).
 */
const BOTH = { "2025-11-25": [], "2026-07-28": [] };

const SCENARIOS: Record<string, Record<string, string[]>> = {
  "server-initialize": { "2025-06-18": [], "2025-11-25": [] },
  "server-session-lifecycle": { "2025-11-25": [] },
  "server-stateless": { "2026-07-28": [] },
  "logging-set-level": { "2025-11-25": [] },
  "ping": { "2025-11-25": [] },
  "completion-complete": { "2025-11-25": [], "2026-07-28": [] },
  "tools-list": { "2025-11-25": [], "2026-07-28": [] },
  "resources-list": { "2025-11-25": [], "2026-07-28": [] },
  "prompts-list": { "2025-11-25": [], "2026-07-28": [] },
  "dns-rebinding-protection": { "2025-11-25": [], "2026-07-28": [] },
  "caching": { "2026-07-28": [] },
  "http-header-validation": { "2026-07-28": [] },
  "sep-2164-resource-not-found": { "2026-07-28": [] },
  // Through the proxy, from the fixture upstream:
  "tools-call-simple-text": BOTH,
  "tools-call-image": BOTH,
  "tools-call-audio": BOTH,
  "tools-call-embedded-resource": BOTH,
  "tools-call-mixed-content": BOTH,
  "tools-call-error": BOTH,
  // Sent before the result: a 2025 session's answer becomes an SSE stream for them.
  "tools-call-with-progress": BOTH,
  "tools-call-with-logging": { "2025-11-25": [] },
  "json-schema-2020-12": BOTH,
  "resources-read-text": BOTH,
  "resources-read-binary": BOTH,
  "resources-templates-read": BOTH,
  "resources-subscribe": { "2025-11-25": [] },
  "resources-unsubscribe": { "2025-11-25": [] },
  "prompts-get-simple": BOTH,
  "prompts-get-with-args": BOTH,
  "prompts-get-embedded-resource": BOTH,
  "prompts-get-with-image": BOTH,
  // Requests for the caller's input, relayed from the fixture upstream (2026-07-28) to the client.
  "tools-call-sampling": { "2025-11-25": [] },
  "tools-call-elicitation": { "2025-11-25": [] },
  "elicitation-sep1034-defaults": { "2025-11-25": [] },
  "elicitation-sep1330-enums": { "2025-11-25": [] },
  "input-required-result-basic-elicitation": { "2026-07-28": [] },
  "input-required-result-basic-sampling": { "2026-07-28": [] },
  "input-required-result-basic-list-roots": { "2026-07-28": [] },
  "input-required-result-request-state": { "2026-07-28": [] },
  "input-required-result-multiple-input-requests": { "2026-07-28": [] },
  "input-required-result-multi-round": { "2026-07-28": [] },
  "input-required-result-missing-input-response": { "2026-07-28": [] },
  "input-required-result-tampered-state": { "2026-07-28": [] },
  "input-required-result-capability-check": { "2026-07-28": [] },
  "input-required-result-ignore-extra-params": { "2026-07-28": [] },
  "input-required-result-validate-input": { "2026-07-28": [] },
  "input-required-result-unsupported-methods": { "2026-07-28": [] },
  "input-required-result-result-type": { "2026-07-28": [] },
  "input-required-result-non-tool-request": { "2026-07-28": [] },
};

/** Runs only the scenarios whose names match this pattern, when set (while working on one). */
const ONLY = Deno.env.get("TOOLGATE_CONFORMANCE_ONLY");

interface Check {
  id: string;
  status: string;
}

async function failedChecks(url: string, scenario: string, version: string): Promise<string[]> {
  const out = await Deno.makeTempDir({ prefix: "toolgate-conformance-" });
  try {
    const run = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--config",
        NPM_SERVERS_CONFIG,
        "--cached-only",
        "-A",
        "--quiet",
        CONFORMANCE,
        "server",
        "--url",
        url,
        "--scenario",
        scenario,
        "--spec-version",
        version,
        "--output-dir",
        out,
      ],
      cwd: out,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const checks: Check[] = [];
    for await (const entry of Deno.readDir(out)) {
      const file = `${out}/${entry.name}/checks.json`;
      checks.push(...JSON.parse(await Deno.readTextFile(file)) as Check[]);
    }
    if (!checks.length) {
      throw new Error(
        `${scenario} at ${version} ran no checks (exit ${run.code}):\n` +
          new TextDecoder().decode(run.stdout) + new TextDecoder().decode(run.stderr),
      );
    }
    return checks.filter((check) => check.status === "FAILURE" || check.status === "ERROR")
      .map((check) => check.id).sort();
  } finally {
    await Deno.remove(out, { recursive: true });
  }
}

Deno.test({
  name:
    "the MCP conformance suite passes every scenario that applies to toolgate, at each revision",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using tmp = await tempHome();
    const everything = npmCommand(EVERYTHING_PACKAGE, "stdio");
    await using server = await startHttpServer({
      home: tmp.home,
      config: {
        plugins: {
          upstream_settings: { connect_timeout_ms: 60_000 },
          upstreams: {
            everything: { kind: "mcp", ...everything, prefix: false },
            conformance: { kind: "mcp", ...conformanceFixtureCommand(), prefix: false },
          },
        },
      },
    });
    const url = `${server.url}/mcp`;
    const results: Record<string, string[]> = {};
    const expected: Record<string, string[]> = {};
    for (const [scenario, versions] of Object.entries(SCENARIOS)) {
      if (ONLY && !new RegExp(ONLY).test(scenario)) continue;
      for (const [version, failing] of Object.entries(versions)) {
        results[`${scenario} @ ${version}`] = await failedChecks(url, scenario, version);
        expected[`${scenario} @ ${version}`] = [...failing].sort();
      }
    }
    assertEquals(results, expected);
  },
});
