/**
 * `webhooks create` for incoming endpoints: --verify/--tolerance stored and
 * shown, the warning without a secret, the path rule, --path, and the
 * command meant when create and add get each other's kind of --url.
 *
 * @module
 */
import { assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";

const create = (home: string, args: string[]) =>
  runCli(["webhooks", "create", "--name", "n", "--handler", "memory_set", ...args], { home });

Deno.test("webhooks create --verify stripe --tolerance: stored, listed and shown; the secret never is", async () => {
  await using tmp = await tempHome();
  const run = await create(tmp.home, [
    "--path",
    "/hooks/stripe",
    "--secret",
    "whsec_abc",
    "--verify",
    "stripe",
    "--tolerance",
    "10m",
  ]);
  assertEquals(run.code, 0, run.stderr);
  assertEquals(run.stderr, "");
  const id = run.stdout.split("\n")[0].trim();
  const other = await runCli([
    "webhooks",
    "create",
    "--name",
    "plain",
    "--url",
    "/hooks/plain",
    "--handler",
    "memory_set",
    "--secret",
    "s",
  ], { home: tmp.home });
  assertEquals(other.code, 0, other.stderr);
  const list = await runCli(["webhooks", "list", "--json", "--incoming"], { home: tmp.home });
  assertEquals(list.code, 0, list.stderr);
  const [stripe, plain] = JSON.parse(list.stdout).incoming;
  assertEquals(
    [stripe.id, stripe.path, stripe.verify, stripe.tolerance_s, stripe.has_secret],
    [id, "/hooks/stripe", "stripe", 600, true],
  );
  assertEquals([plain.verify, plain.tolerance_s], ["hmac-sha256", undefined]);
  assertEquals(list.stdout.includes("whsec_abc"), false);
  const table = await runCli(["webhooks", "list", "--incoming"], { home: tmp.home });
  assertStringIncludes(table.stdout, "yes (stripe, ±600s)");
  assertStringIncludes(table.stdout, "yes (hmac-sha256)");
  const show = await runCli(["webhooks", "show", id], { home: tmp.home });
  assertStringIncludes(show.stdout, "secret: yes; verify: stripe (tolerance 600s)");
  assertEquals(show.stdout.includes("whsec_abc"), false);
});

Deno.test("webhooks create without a secret warns that anyone who knows the path can call the handler", async () => {
  await using tmp = await tempHome();
  const run = await create(tmp.home, ["--path", "/hooks/open"]);
  assertEquals(run.code, 0, run.stderr);
  assertMatch(
    run.stderr,
    /warning: endpoint in_\w+ has no secret: anyone who can reach \/hooks\/open can call memory_set/,
  );
  assertStringIncludes(run.stderr, "--secret");
});

const BAD: { name: string; args: string[]; message: RegExp }[] = [
  ...["/hooks/a%20b", "/hooks//x", "/hooks/x/", "/hooks/a b", "/hooks/../x", "/hooks/x?y=1"].map(
    (path) => ({
      name: `path ${path}`,
      args: ["--path", path],
      message: new RegExp(
        `Invalid --path "${path.replace(/[?.]/g, "\\$&")}": use a plain URL path: "/" then ` +
          `segments of letters, digits and - \\. _ ~`,
      ),
    }),
  ),
  {
    name: "a full URL to create",
    args: ["--url", "https://example.com/hooks/x"],
    message:
      /Invalid --url "https:\/\/example.com\/hooks\/x": webhooks create registers an incoming endpoint at a path on this server.*toolgate webhooks add --url https:\/\/example.com\/hooks\/x/,
  },
  {
    name: "both --path and --url",
    args: ["--path", "/hooks/a", "--url", "/hooks/a"],
    message: /give the path once/,
  },
  { name: "no path", args: [], message: /Missing --path/ },
  {
    name: "--verify without --secret",
    args: ["--path", "/hooks/a", "--verify", "github"],
    message: /Invalid --verify: it needs --secret/,
  },
  {
    name: "unknown scheme",
    args: ["--path", "/hooks/a", "--secret", "s", "--verify", "gitlab"],
    message:
      /Invalid --verify "gitlab": expected one of hmac-sha256, github, stripe, slack, shopify, standard-webhooks/,
  },
  {
    name: "--tolerance for a scheme without a timestamp",
    args: ["--path", "/hooks/a", "--secret", "s", "--verify", "github", "--tolerance", "60s"],
    message: /Invalid --tolerance: only schemes that sign a timestamp/,
  },
  {
    name: "--tolerance not whole seconds",
    args: ["--path", "/hooks/a", "--secret", "s", "--verify", "slack", "--tolerance", "1500ms"],
    message: /Invalid --tolerance "1500ms": expected whole seconds from 1s to 24h/,
  },
  {
    name: "--signature-header with another scheme",
    args: [
      "--path",
      "/hooks/a",
      "--secret",
      "s",
      "--verify",
      "stripe",
      "--signature-header",
      "X-Sig",
    ],
    message: /--signature-header applies to hmac-sha256 only/,
  },
];

for (const bad of BAD) {
  Deno.test(`webhooks create refuses ${bad.name} (exit 2, nothing stored)`, async () => {
    await using tmp = await tempHome();
    const run = await create(tmp.home, bad.args);
    assertEquals(run.code, 2, run.stderr);
    assertMatch(run.stderr, bad.message);
    const list = await runCli(["webhooks", "list", "--json"], { home: tmp.home });
    assertEquals(JSON.parse(list.stdout), { outgoing: [], incoming: [] });
  });
}

Deno.test("webhooks add --url with a bare path says webhooks create --path was meant", async () => {
  await using tmp = await tempHome();
  const run = await runCli(["webhooks", "add", "--url", "/hooks/x"], { home: tmp.home });
  assertEquals(run.code, 2, run.stderr);
  assertMatch(
    run.stderr,
    /Invalid --url "\/hooks\/x": webhooks add registers an outgoing webhook .*toolgate webhooks create --path \/hooks\/x/,
  );
});
