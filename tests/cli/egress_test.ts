import { assertEquals, assertMatch } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";

Deno.test("webhooks add refuses a metadata, loopback or own address up front with EGRESS_DENIED naming the fix", async () => {
  await using tmp = await tempHome();
  const strict = { TOOLGATE_EGRESS_ALLOW: "" };
  const metadata = await runCli(
    ["webhooks", "add", "--url", "http://169.254.169.254/latest/meta-data"],
    { home: tmp.home, env: strict },
  );
  assertEquals(metadata.code, 1, metadata.stderr);
  assertMatch(metadata.stderr, /a cloud metadata address/);
  assertMatch(metadata.stderr, /"169\.254\.169\.254\/32" to egress\.allow .*TOOLGATE_EGRESS_ALLOW/);
  const loopback = await runCli(["webhooks", "add", "--url", "http://localhost:9/hook"], {
    home: tmp.home,
    env: strict,
  });
  assertEquals(loopback.code, 1, loopback.stderr);
  assertMatch(loopback.stderr, /Refused to connect to 127\.0\.0\.1/);
  // Allowed explicitly (the test helpers allow 127.0.0.1/32), it is registered...
  const allowed = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/hook"], {
    home: tmp.home,
  });
  assertEquals(allowed.code, 0, allowed.stderr);
  // ...but never toolgate's own configured address.
  const own = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:7899/hooks/x"], {
    home: tmp.home,
    env: { TOOLGATE_PORT: "7899" },
  });
  assertEquals(own.code, 1, own.stderr);
  assertMatch(own.stderr, /toolgate's own listening address \(127\.0\.0\.1:7899\)/);
  const list = await runCli(["webhooks", "list", "--json"], { home: tmp.home });
  assertEquals(JSON.parse(list.stdout).outgoing.length, 1);
});

Deno.test("webhooks test of a receiver the policy refuses fails with EGRESS_DENIED (exit 1)", async () => {
  await using tmp = await tempHome();
  const added = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/hook"], {
    home: tmp.home,
  });
  assertEquals(added.code, 0, added.stderr);
  const id = added.stdout.trim();
  const tested = await runCli(["webhooks", "test", id], {
    home: tmp.home,
    env: { TOOLGATE_EGRESS_ALLOW: "" },
  });
  assertEquals(tested.code, 1, tested.stderr);
  assertMatch(
    tested.stderr,
    /Test delivery to http:\/\/127\.0\.0\.1:9\/hook refused: Refused to connect to /,
  );
  assertMatch(tested.stderr, /"127\.0\.0\.1\/32" to egress\.allow/);
});

Deno.test("plugins add --url refuses a metadata or own address up front; loopback is fine for an upstream", async () => {
  await using tmp = await tempHome();
  const strict = { TOOLGATE_EGRESS_ALLOW: "" };
  const metadata = await runCli(
    ["plugins", "add", "meta", "--url", "http://169.254.169.254/mcp"],
    { home: tmp.home, env: strict },
  );
  assertEquals(metadata.code, 1, metadata.stderr);
  assertMatch(metadata.stderr, /a cloud metadata address, which MCP upstreams may not reach/);
  const own = await runCli(["plugins", "add", "self", "--url", "http://127.0.0.1:7821/mcp"], {
    home: tmp.home,
    env: strict,
  });
  assertEquals(own.code, 1, own.stderr);
  assertMatch(own.stderr, /toolgate's own listening address/);
  const local = await runCli(["plugins", "add", "local", "--url", "http://127.0.0.1:3001/mcp"], {
    home: tmp.home,
    env: strict,
  });
  assertEquals(local.code, 0, local.stderr);
});
