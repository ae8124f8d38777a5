import { assertEquals, assertMatch } from "../_asserts.ts";
import { ROOT, runCli, tempHome } from "../_helpers.ts";

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

const RECEIVERS = [
  {
    name: "TypeScript",
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", `${ROOT}examples/receiver.ts`],
  },
  { name: "Python", command: "/usr/bin/python3", args: [`${ROOT}examples/receiver.py`] },
];

for (const receiver of RECEIVERS) {
  Deno.test(`the README's ${receiver.name} receiver accepts a real signed delivery and rejects a wrong secret`, async () => {
    await using tmp = await tempHome();
    const port = freePort();
    const child = new Deno.Command(receiver.command, {
      args: [...receiver.args, String(port)],
      env: { WEBHOOK_SECRET: "example-s3cret" },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    try {
      for (let i = 0; i < 100; i++) {
        try {
          (await Deno.connect({ hostname: "127.0.0.1", port })).close();
          break;
        } catch {
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      const url = `http://127.0.0.1:${port}/`;
      const good = (await runCli(["webhooks", "add", "--url", url, "--secret", "example-s3cret"], {
        home: tmp.home,
      })).stdout.trim();
      const bad = (await runCli(["webhooks", "add", "--url", url, "--secret", "other"], {
        home: tmp.home,
      })).stdout.trim();
      const accepted = await runCli(["webhooks", "test", good], { home: tmp.home });
      assertEquals(accepted.code, 0, accepted.stderr);
      assertMatch(accepted.stdout, /HTTP 204/);
      const rejected = await runCli(["webhooks", "test", bad], { home: tmp.home });
      assertEquals(rejected.code, 1);
      assertMatch(rejected.stdout, /HTTP 401/);
    } finally {
      child.kill();
      const output = await child.output();
      const stdout = new TextDecoder().decode(output.stdout);
      assertMatch(stdout, /verified webhook\.test evt_/);
    }
  });
}
