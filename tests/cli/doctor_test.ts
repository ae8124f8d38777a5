/**
 * `toolgate doctor` against a healthy setup and a broken one, each check
 * failing once, and `toolgate config validate [file]`: real processes, a real
 * upstream fixture, a real port held by another program.
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { conformanceFixtureCommand } from "../plugins/_upstreams.ts";
import { startHttpServer } from "../e2e/_http_server.ts";

interface Check {
  name: string;
  status: "ok" | "warn" | "fail";
  message: string;
  fix?: string;
}

async function doctor(home: string, env: Record<string, string> = {}) {
  const run = await runCli(["doctor", "--json"], { home, env });
  const report = JSON.parse(run.stdout) as {
    ok: boolean;
    checks: Check[];
    mcp_host_entry: unknown;
  };
  return { run, report, check: (name: string) => report.checks.find((c) => c.name === name) };
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

Deno.test("doctor on a healthy setup: every check ok, exit 0, and a working MCP host entry", async () => {
  await using tmp = await tempHome();
  await Deno.chmod(tmp.home, 0o700);
  const { command, args } = conformanceFixtureCommand();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({
      server: { port: freePort() },
      plugins: { upstreams: { fixture: { kind: "mcp", command, args } } },
    }),
  );
  // A loopback receiver: allowed by the TOOLGATE_EGRESS_ALLOW runCli sets (no DNS needed).
  const added = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/hook"], {
    home: tmp.home,
  });
  assertEquals(added.code, 0, added.stderr);
  const { run, report, check } = await doctor(tmp.home);
  assertEquals(run.code, 0, run.stdout + run.stderr);
  assertEquals(report.ok, true);
  for (const c of report.checks) assert(c.status !== "fail", JSON.stringify(c));
  for (
    const name of ["config", "data_dir", "store", "key", "upstream:fixture", "port", "network"]
  ) {
    assertEquals(check(name)?.status, "ok", JSON.stringify(check(name)));
  }
  assertStringIncludes(check("upstream:fixture")!.message, "connected");
  assertEquals(report.checks.filter((c) => c.name.startsWith("webhook:")).length, 1);
  const entry = report.mcp_host_entry as {
    mcpServers: { toolgate: { command: string; args: string[]; env: Record<string, string> } };
  };
  assertEquals(entry.mcpServers.toolgate.args.slice(-2), ["mcp", "start"]);
  assertEquals(entry.mcpServers.toolgate.env.TOOLGATE_HOME, tmp.home);
  // The text form: one line per check, then the entry.
  const text = await runCli(["doctor"], { home: tmp.home });
  assertEquals(text.code, 0, text.stderr);
  assertStringIncludes(text.stdout, "ok    config");
  assertStringIncludes(text.stdout, '"mcpServers"');
});

Deno.test("doctor on a broken setup: each check fails once, naming the fix, exit 1", async (t) => {
  await using tmp = await tempHome();
  const home = tmp.home;

  await t.step("config", async () => {
    await Deno.writeTextFile(`${home}/config.json`, JSON.stringify({ tools: { bogus: 1 } }));
    const { run, check } = await doctor(home);
    assertEquals(run.code, 1);
    assertEquals(check("config")?.status, "fail");
    assertStringIncludes(check("config")!.message, 'unknown key "bogus"');
    assert(check("config")!.fix);
    await Deno.remove(`${home}/config.json`);
  });

  await t.step("store", async () => {
    const { run, check } = await doctor(home, {
      TOOLGATE_DATABASE_URL: `postgres://toolgate@127.0.0.1:${freePort()}/toolgate`,
    });
    assertEquals(run.code, 1);
    assertEquals(check("store")?.status, "fail");
    assertStringIncludes(check("store")!.message, "STORE_UNAVAILABLE");
    assertStringIncludes(check("store")!.fix!, "start the database");
  });

  await t.step("key and webhook secret", async () => {
    const added = await runCli(["webhooks", "add", "--url", "https://example.com/k"], { home });
    assertEquals(added.code, 0, added.stderr);
    const other = btoa(String.fromCharCode(...new Uint8Array(32).fill(9)));
    const { run, report, check } = await doctor(home, { TOOLGATE_SECRET_KEY: other });
    assertEquals(run.code, 1);
    assertEquals(check("key")?.status, "fail");
    assertStringIncludes(check("key")!.message, "is NOT the store's");
    const hook = report.checks.find((c) => c.name.startsWith("webhook:"));
    assertEquals(hook?.status, "fail");
    assertStringIncludes(hook!.message, "Cannot decrypt");
    const removed = await runCli(["webhooks", "remove", hook!.name.slice("webhook:".length)], {
      home,
    });
    assertEquals(removed.code, 0, removed.stderr);
  });

  await t.step("webhook refused by the egress policy", async () => {
    const added = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/x"], { home });
    assertEquals(added.code, 0, added.stderr);
    const { run, report } = await doctor(home, { TOOLGATE_EGRESS_ALLOW: "" });
    assertEquals(run.code, 1);
    const hook = report.checks.find((c) => c.name.startsWith("webhook:"));
    assertEquals(hook?.status, "fail");
    assertStringIncludes(hook!.message, "EGRESS_DENIED");
    assertStringIncludes(hook!.fix!, "egress.allow");
    await runCli(["webhooks", "remove", hook!.name.slice("webhook:".length)], { home });
  });

  await t.step("upstream", async () => {
    await Deno.writeTextFile(
      `${home}/config.json`,
      JSON.stringify({
        plugins: { upstreams: { gone: { kind: "mcp", command: "/nonexistent/mcp-server" } } },
      }),
    );
    const { run, check } = await doctor(home);
    assertEquals(run.code, 1);
    assertEquals(check("upstream:gone")?.status, "fail", JSON.stringify(check("upstream:gone")));
    assertStringIncludes(check("upstream:gone")!.fix!, "plugins.upstreams.gone");
    await Deno.remove(`${home}/config.json`);
  });

  await t.step("port: used by another program, then served by toolgate", async () => {
    await using other = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      () => new Response("not toolgate", { status: 404 }),
    );
    await Deno.writeTextFile(
      `${home}/config.json`,
      JSON.stringify({ server: { port: other.addr.port } }),
    );
    const { run, check } = await doctor(home);
    assertEquals(run.code, 1);
    assertEquals(check("port")?.status, "fail");
    assertStringIncludes(check("port")!.message, "in use by another program");
    await other.shutdown();
    await Deno.remove(`${home}/config.json`);
    await using server = await startHttpServer({ home });
    await Deno.writeTextFile(
      `${home}/config.json`,
      JSON.stringify({ server: { port: server.port } }),
    );
    const served = await doctor(home);
    assertEquals(served.check("port")?.status, "ok");
    assertStringIncludes(served.check("port")!.message, "served by toolgate");
    await Deno.remove(`${home}/config.json`);
  });
});

Deno.test("config validate: a good file, a bad one with the problem named, exit 1", async () => {
  await using tmp = await tempHome();
  const good = `${tmp.home}/good.json`;
  const bad = `${tmp.home}/bad.json`;
  await Deno.writeTextFile(good, JSON.stringify({ tools: { timeout_ms: 5000 } }));
  await Deno.writeTextFile(bad, JSON.stringify({ server: { cors_origins: ["not an origin"] } }));
  const ok = await runCli(["config", "validate", good], { home: tmp.home });
  assertEquals([ok.code, ok.stdout], [0, `${good} is valid\n`]);
  const failed = await runCli(["config", "validate", bad, "--json"], { home: tmp.home });
  assertEquals(failed.code, 1);
  const report = JSON.parse(failed.stdout);
  assertEquals([report.valid, report.error.code], [false, "CONFIG_INVALID"]);
  assertStringIncludes(failed.stderr, '"not an origin" is not an origin');
  const fallback = await runCli(["config", "validate"], { home: tmp.home });
  assertEquals(fallback.code, 0, fallback.stderr);
  assertStringIncludes(fallback.stdout, "config.json is valid");
});
