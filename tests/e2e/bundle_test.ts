import { assertEquals, assertMatch } from "../_asserts.ts";
import { initializeRequest, ROOT, runCli, tempHome } from "../_helpers.ts";
import { VERSION } from "../../src/version.ts";

Deno.test("the bundle serves every command from another working directory", async () => {
  await using tmp = await tempHome();
  const bundle = `${tmp.home}/toolgate.js`;
  const built = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", `${ROOT}scripts/bundle.ts`, bundle],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(built.code, 0, new TextDecoder().decode(built.stderr));
  const cwd = await Deno.makeTempDir({ dir: tmp.home, prefix: "cwd-" });
  const home = `${tmp.home}/data`;
  const run = (args: string[], stdin?: string) =>
    runCli(args, { home, cwd, script: bundle, stdin });

  const version = await run(["--version"]);
  assertEquals(version.stdout.trim(), VERSION);

  const add = await run(["webhooks", "add", "--url", "http://127.0.0.1:9/hook"]);
  assertEquals(add.code, 0, add.stderr);
  const id = add.stdout.trim();
  const list = JSON.parse((await run(["webhooks", "list", "--json"])).stdout);
  assertEquals(list.outgoing.map((w: { id: string }) => w.id), [id]);
  assertEquals((await run(["webhooks", "remove", id])).code, 0);

  const initialize = JSON.stringify(initializeRequest("bundle-test"));
  const mcp = await run(["mcp", "start"], initialize + "\n");
  assertEquals(mcp.code, 0, mcp.stderr);
  const reply = JSON.parse(mcp.stdout.trim().split("\n")[0]);
  assertEquals(reply.id, 1);
  assertEquals(reply.result.serverInfo, { name: "toolgate", version: VERSION });
  assertMatch(mcp.stdout, /^\{"result"/);
});
