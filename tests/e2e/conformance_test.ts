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
  "server-stateless": {
    "2026-07-28": [
      "sep-2575-server-rejects-undeclared-capability",
      "sep-2575-missing-capability-http-400",
      "sep-2575-http-server-no-independent-requests-on-stream",
      "sep-2575-server-no-log-without-loglevel",
    ],
  },
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
  "tools-call-with-progress": {
    // 2025 sessions answer with one JSON body by default (server.mcp_responses): no progress.
    "2025-11-25": ["tools-call-with-progress"],
    "2026-07-28": [],
  },
  // The same for the log messages of a call.
  "tools-call-with-logging": { "2025-11-25": ["tools-call-with-logging"] },
  "json-schema-2020-12": BOTH,
  "resources-read-text": BOTH,
  "resources-read-binary": BOTH,
  "resources-templates-read": BOTH,
  "prompts-get-simple": BOTH,
  "prompts-get-with-args": BOTH,
  "prompts-get-embedded-resource": BOTH,
  "prompts-get-with-image": BOTH,
};

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
      for (const [version, failing] of Object.entries(versions)) {
        results[`${scenario} @ ${version}`] = await failedChecks(url, scenario, version);
        expected[`${scenario} @ ${version}`] = [...failing].sort();
      }
    }
    assertEquals(results, expected);
  },
});
