import {
  assert,
  assertEquals,
  assertMatch,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { benchLayerOff, loadConfig, parseConfigFile } from "../../src/config/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";

Deno.test("loadConfig() applies defaults, then the file, then environment overrides", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({
      server: { port: 9000 },
      tools: { circuit_threshold: 2 },
      incoming: { concurrency: 64 },
    }),
  );
  const config = await loadConfig({
    env: { TOOLGATE_HOME: tmp.home, TOOLGATE_PORT: "9100", TOOLGATE_RETRY_BASE_MS: "5" },
  });
  assertEquals(config.server.port, 9100);
  assertEquals(config.server.host, "127.0.0.1");
  assertEquals(config.tools.circuit_threshold, 2);
  assertEquals(config.tools.circuit_reset_ms, 30_000);
  assertEquals(config.webhooks.retry_base_ms, 5);
  assertEquals(config.incoming.concurrency, 64);
  assertEquals(config.incoming.body_limit_bytes, 1024 * 1024);
  assertEquals(config.server.mcp_responses, "json");
  assertEquals(Object.isFrozen(config.server), true);
});

Deno.test("loadConfig() names every unknown key and bad value with its path", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({
      server: { port: "x", hots: "a", mcp_responses: "stream" },
      tools: { timeout_ms: -1 },
      incoming: { concurrency: 0 },
    }),
  );
  const error = await assertRejects(
    () => loadConfig({ env: { TOOLGATE_HOME: tmp.home } }),
    GatewayError,
  );
  assertEquals((error as GatewayError).code, "CONFIG_INVALID");
  assertMatch(error.message, /server\.port/);
  assertMatch(error.message, /hots/);
  assertMatch(error.message, /server\.mcp_responses.*"json".*"sse"/);
  assertMatch(error.message, /tools\.timeout_ms/);
  assertMatch(error.message, /incoming\.concurrency/);
});

Deno.test("loadConfig() rejects a bad environment value naming the variable", async () => {
  await using tmp = await tempHome();
  const error = await assertRejects(
    () => loadConfig({ env: { TOOLGATE_HOME: tmp.home, TOOLGATE_RETRY_BASE_MS: "soon" } }),
    GatewayError,
  );
  assertMatch(error.message, /TOOLGATE_RETRY_BASE_MS: "soon"/);
});

Deno.test("loadConfig() holds environment values to the same bounds as the keys they set", async () => {
  await using tmp = await tempHome();
  for (
    const name of ["TOOLGATE_RETRY_BASE_MS", "TOOLGATE_WEBHOOK_TIMEOUT_MS", "TOOLGATE_POLL_MS"]
  ) {
    const error = await assertRejects(
      () => loadConfig({ env: { TOOLGATE_HOME: tmp.home, [name]: "0" } }),
      GatewayError,
    );
    assertEquals(error.message, `Invalid ${name}: "0" is not a positive integer`);
  }
  // Port 0 asks the system for a free port.
  const config = await loadConfig({ env: { TOOLGATE_HOME: tmp.home, TOOLGATE_PORT: "0" } });
  assertEquals(config.server.port, 0);
});

Deno.test("config.json upstreams are checked like plugins add: name rule, and fields of their kind", async () => {
  await using tmp = await tempHome();
  const problems = async (upstreams: Record<string, unknown>) => {
    await Deno.writeTextFile(`${tmp.home}/config.json`, JSON.stringify({ plugins: { upstreams } }));
    const error = await assertRejects(
      () => loadConfig({ env: { TOOLGATE_HOME: tmp.home } }),
      GatewayError,
    );
    return error.message;
  };
  assertMatch(
    await problems({ Bad: { kind: "mcp", command: "x" } }),
    /plugins\.upstreams\.Bad: expected a name matching/,
  );
  assertMatch(
    await problems({ a__b: { kind: "mcp", command: "x" } }),
    /plugins\.upstreams\.a__b: .*"__"/,
  );
  assertMatch(
    await problems({ s: { kind: "mcp", command: "x", headers: { A: "b" } } }),
    /plugins\.upstreams\.s\.headers: headers are for a url/,
  );
  assertMatch(
    await problems({ h: { kind: "mcp", url: "http://127.0.0.1:9/mcp", env: { A: "b" } } }),
    /plugins\.upstreams\.h\.env: args and env are for a command/,
  );
  assertMatch(
    await problems({ r: { kind: "mcp", command: "x", rename: { echo: "say it" } } }),
    /plugins\.upstreams\.r\.rename\.echo: expected 1-128 of A-Z a-z 0-9 _ \. -/,
  );
  assertMatch(
    await problems({ p: { kind: "mcp", command: "x", prefix: "no" } }),
    /plugins\.upstreams\.p\.prefix/,
  );
});

Deno.test("a file named by TOOLGATE_CONFIG must exist, and its errors name it", async () => {
  await using tmp = await tempHome();
  const named = `${tmp.home}/other.json`;
  const missing = await assertRejects(
    () => loadConfig({ env: { TOOLGATE_HOME: tmp.home, TOOLGATE_CONFIG: named } }),
    GatewayError,
  );
  assertEquals(missing.code, "CONFIG_INVALID");
  assertEquals(
    missing.message,
    `Cannot read TOOLGATE_CONFIG=${named}: no such file; unset it to use ${tmp.home}/config.json`,
  );
  await Deno.writeTextFile(named, JSON.stringify({ tools: { timeout_ms: 0 } }));
  const bad = await assertRejects(
    () => loadConfig({ env: { TOOLGATE_HOME: tmp.home, TOOLGATE_CONFIG: named } }),
    GatewayError,
  );
  assertMatch(bad.message, new RegExp(`^Invalid ${named}: tools\\.timeout_ms: `));
  await Deno.writeTextFile(named, JSON.stringify({ tools: { timeout_ms: 5 } }));
  const config = await loadConfig({ env: { TOOLGATE_HOME: tmp.home, TOOLGATE_CONFIG: named } });
  assertEquals(config.tools.timeout_ms, 5);
});

Deno.test("an invalid config.json stops start-up with exit 1 and one line naming the key", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(`${tmp.home}/config.json`, JSON.stringify({ tools: { bogus: 1 } }));
  const run = await runCli(["mcp", "start"], { home: tmp.home });
  assertEquals(run.code, 1);
  assertMatch(
    run.stderr,
    /^toolgate: CONFIG_INVALID: Invalid config\.json: tools: unknown key "bogus"; accepted keys: timeout_ms, circuit_threshold, circuit_reset_ms, overrides \(see docs\/configuration\.md\)\n$/,
  );
  await Deno.writeTextFile(`${tmp.home}/config.json`, "{not json");
  const broken = await runCli(["tools", "list"], { home: tmp.home });
  assertEquals(broken.code, 1);
  assertMatch(broken.stderr, /config\.json: not JSON/);
});

Deno.test("egress.allow entries are checked at start-up, naming the key or variable and the fix", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ egress: { allow: ["10.0.0.0/8", "10.0.0.0/40", "*.corp.example"] } }),
  );
  const error = await assertRejects(
    () => loadConfig({ env: { TOOLGATE_HOME: tmp.home } }),
    GatewayError,
  );
  assertEquals(error.code, "CONFIG_INVALID");
  assertMatch(error.message, /egress\.allow\[1\]: "10\.0\.0\.0\/40": prefix length 40 is over 32/);
  assertMatch(error.message, /fix or remove it/);
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ egress: { allow: ["a.internal"] } }),
  );
  const bad = await assertRejects(
    () =>
      loadConfig({
        env: { TOOLGATE_HOME: tmp.home, TOOLGATE_EGRESS_ALLOW: "127.0.0.1/32, host:80" },
      }),
    GatewayError,
  );
  assertMatch(
    bad.message,
    /^Invalid TOOLGATE_EGRESS_ALLOW: "host:80": ports are not part of an entry/,
  );
  const config = await loadConfig({
    env: { TOOLGATE_HOME: tmp.home, TOOLGATE_EGRESS_ALLOW: "127.0.0.1/32, ::1" },
  });
  assertEquals(config.egress.allow, ["a.internal", "127.0.0.1/32", "::1"]);
});

function configError(file: unknown): GatewayError {
  try {
    parseConfigFile(file);
  } catch (error) {
    return error as GatewayError;
  }
  throw new Error("expected a config error");
}

Deno.test("config errors say where, what is accepted and an example, never the validator's text", () => {
  const missing = configError({ auth: { oauth: { issuer: "https://id.example.com" } } });
  assertEquals(missing.code, "CONFIG_INVALID");
  assertEquals(
    missing.message,
    'Invalid config.json: auth.oauth.audience: missing; expected a string, e.g. "text"; ' +
      'auth.oauth.scopes: missing; expected an object of names to values, e.g. {"name": …} ' +
      "(see docs/configuration.md)",
  );
  const wrong = configError({ server: { port: "80", mcp_responses: "xml" } });
  assertEquals(
    wrong.message,
    "Invalid config.json: server.port: expected a number, e.g. 5000, got a string; " +
      'server.mcp_responses: expected one of "json", "sse" (see docs/configuration.md)',
  );
  for (const error of [missing, wrong]) {
    assertEquals(/Invalid input|received undefined|Unrecognized/.test(error.message), false);
  }
});

Deno.test("50 000 unknown keys give a short message: at most 20 names, then how many more", () => {
  const file = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, 1]));
  const error = configError(file);
  assertEquals(error.message.length < 1000, true, `${error.message.length} characters`);
  assertMatch(error.message, /unknown keys "k0", "k1", .* "k19" and 49980 more; accepted keys: /);
  const many = configError({
    servers: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`s${i}`, { tools: 5 }])),
  });
  assertMatch(many.message, /; and 10 more problems \(see docs\/configuration\.md\)$/);
  assertEquals((many.details as unknown[]).length, 20);
});

Deno.test('server.cors_origins entries must be origins, or "*" alone', () => {
  const mixed = configError({ server: { cors_origins: ["*", "not an origin"] } });
  assertMatch(mixed.message, /server\.cors_origins\[0\]: "\*" allows every origin: give it alone/);
  assertMatch(mixed.message, /server\.cors_origins\[1\]: "not an origin" is not an origin/);
  for (
    const bad of [
      "https://app.example.com/",
      "https://app.example.com/path",
      "ftp://x.test",
      "app.example.com",
    ]
  ) {
    assertMatch(configError({ server: { cors_origins: [bad] } }).message, /is not an origin/, bad);
  }
  for (const good of [["*"], ["https://app.example.com", "http://localhost:5173"]]) {
    assertEquals(parseConfigFile({ server: { cors_origins: good } }).server.cors_origins, good);
  }
});

Deno.test("audit: durations parse, bad ones and bad origins name their key", () => {
  const parsed = parseConfigFile({
    audit: { checkpoint_interval: "500ms", retention: { max_age: "90d" } },
  });
  assertEquals(parsed.audit.checkpoint_interval, 500);
  assertEquals(parsed.audit.retention, { max_age: 90 * 86_400_000, every: 3_600_000 });
  assertEquals(parsed.audit.receipts, true);
  for (
    const [audit, key] of [
      [{ checkpoint_interval: "1x" }, "audit.checkpoint_interval"],
      [{ origin: "has space" }, "audit.origin"],
      [{ origin: "12345" }, "audit.origin"],
      [
        { checkpoints: { sinks: [{ url: "ftp://x" }] } },
        "audit.checkpoints.sinks[0].url: use an http:// or https:// URL",
      ],
    ] as const
  ) {
    const error = assertThrows(() => parseConfigFile({ audit }));
    assertStringIncludes(error.message, key);
  }
});

Deno.test("TOOLGATE_BENCH_LAYERS_OFF names layers a benchmark switches off; an unknown one stops start-up", async () => {
  await using tmp = await tempHome();
  assertEquals((await loadConfig({ env: { TOOLGATE_HOME: tmp.home } })).benchLayersOff, []);
  const config = await loadConfig({
    env: { TOOLGATE_HOME: tmp.home, TOOLGATE_BENCH_LAYERS_OFF: " identity,receipts,identity " },
  });
  assertEquals(config.benchLayersOff, ["identity", "receipts"]);
  assert(benchLayerOff(config, "identity") && !benchLayerOff(config, "tracing"));
  const error = await assertRejects(
    () => loadConfig({ env: { TOOLGATE_HOME: tmp.home, TOOLGATE_BENCH_LAYERS_OFF: "audit" } }),
    GatewayError,
  );
  assertEquals(error.code, "CONFIG_INVALID");
  assertStringIncludes(
    error.message,
    'unknown layer "audit"; expected some of http_checks, identity',
  );
});
