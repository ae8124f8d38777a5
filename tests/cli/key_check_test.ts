/**
 * The checked secret key from the command line: a CLI or server whose key
 * is not the store's refuses to seal and to start, naming both
 * fingerprints; `db status` shows them.
 */
import { assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";

const OTHER_KEY = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));

Deno.test("a CLI with another key cannot add a webhook, the server refuses to start, db status shows both fingerprints", async () => {
  await using tmp = await tempHome();
  const home = tmp.home;
  const added = await runCli(["webhooks", "add", "--url", "https://example.com/a"], { home });
  assertEquals(added.code, 0, added.stderr);
  const status = await runCli(["db", "status", "--json"], { home });
  assertEquals(status.code, 0, status.stderr);
  const own = JSON.parse(status.stdout).key;
  assertEquals(own.state, "match");
  assertMatch(own.key_fingerprint, /^[0-9a-f]{16}$/);

  const env = { TOOLGATE_SECRET_KEY: OTHER_KEY };
  const refused = await runCli(["webhooks", "add", "--url", "https://example.com/b"], {
    home,
    env,
  });
  assertEquals(refused.code, 1, refused.stderr);
  assertStringIncludes(refused.stderr, "KEY_MISMATCH");
  assertStringIncludes(refused.stderr, own.key_fingerprint);
  const otherFingerprint = /fingerprint ([0-9a-f]{16}), from TOOLGATE_SECRET_KEY/.exec(
    refused.stderr,
  )?.[1];
  assertMatch(otherFingerprint ?? "", /^[0-9a-f]{16}$/);
  const listed = await runCli(["webhooks", "list", "--json"], { home });
  assertEquals(JSON.parse(listed.stdout).outgoing.length, 1, "nothing was added");

  const server = await runCli(["mcp", "start"], { home, env, stdin: "" });
  assertEquals(server.code, 1, server.stderr);
  assertStringIncludes(server.stderr, "KEY_MISMATCH");
  assertStringIncludes(server.stderr, own.key_fingerprint);
  assertStringIncludes(server.stderr, otherFingerprint!);
  assertEquals(server.stdout, "", "nothing but JSON-RPC on stdout, and here nothing at all");

  const shown = await runCli(["db", "status"], { home, env });
  assertEquals(shown.code, 0, shown.stderr);
  assertStringIncludes(
    shown.stdout,
    `Secret key: ${otherFingerprint} (TOOLGATE_SECRET_KEY) is NOT the store's (${own.key_fingerprint})`,
  );
});
