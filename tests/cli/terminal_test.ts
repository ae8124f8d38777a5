/**
 * The CLI on a real terminal: each command runs under `script`, which gives
 * it a pseudo-terminal for stdin, stdout and stderr, and the test types into it.
 *
 * @module
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { MAIN, ROOT, runCli, tempHome } from "../_helpers.ts";

/** A command running on a pseudo-terminal. */
class Terminal implements AsyncDisposable {
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #output = "";
  #reading: Promise<void>;

  constructor(args: string[], env: Record<string, string>) {
    const quoted = [Deno.execPath(), "run", "-A", "--cached-only", MAIN, ...args]
      .map((arg) => `'${arg.replaceAll("'", `'\\''`)}'`).join(" ");
    const child = new Deno.Command("script", {
      args: ["-qfec", `${quoted}; echo "[exit $?]"`, "/dev/null"],
      cwd: ROOT,
      env: { NO_COLOR: "1", TOOLGATE_KEYCHAIN: "file", ...env },
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    this.#reading = (async () => {
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        this.#output += chunk;
      }
    })();
  }

  /** Everything the terminal showed so far. */
  get output(): string {
    return this.#output;
  }

  /** Waits until the terminal shows `text` (at most 30 s). */
  async waitFor(text: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!this.#output.includes(text)) {
      if (Date.now() > deadline) throw new Error(`no "${text}" in:\n${this.#output}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Types `text` (use `\r` for Enter, `\x04` for Ctrl-D). */
  async type(text: string): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(text));
  }

  /** Waits for the command to end and returns its exit code as the shell saw it. */
  async exitCode(): Promise<number> {
    await this.waitFor("[exit ");
    return Number(/\[exit (\d+)\]/.exec(this.#output)![1]);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.#writer.close().catch(() => {});
    try {
      this.#child.kill("SIGKILL");
    } catch {
      // Already ended.
    }
    await this.#child.status;
    await this.#reading;
  }
}

Deno.test("keychain set on a terminal prompts for the value and does not echo it", async () => {
  await using tmp = await tempHome();
  const secret = "xoxb-typed-at-the-prompt";
  {
    await using terminal = new Terminal(["keychain", "set", "slack.bot_token"], {
      TOOLGATE_HOME: tmp.home,
    });
    await terminal.waitFor("Value for slack.bot_token (input hidden): ");
    // A typo and its correction with Backspace, then Enter.
    await terminal.type(`${secret}X\x7f\r`);
    assertEquals(await terminal.exitCode(), 0, terminal.output);
    assertStringIncludes(terminal.output, "Stored slack.bot_token");
    assert(!terminal.output.includes(secret), `the secret was echoed:\n${terminal.output}`);
  }
  const env = { TOOLGATE_SECRET_SLACK_BOT_TOKEN: "" };
  const list = await runCli(["plugins", "list", "--json"], { home: tmp.home, env });
  const slack = JSON.parse(list.stdout).find((p: { name: string }) => p.name === "slack");
  assertEquals(slack.state, "ready");
});

Deno.test("keychain set on a terminal: Enter on nothing stores nothing and says how", async () => {
  await using tmp = await tempHome();
  await using terminal = new Terminal(["keychain", "set", "slack.bot_token"], {
    TOOLGATE_HOME: tmp.home,
  });
  await terminal.waitFor("(input hidden): ");
  await terminal.type("\r");
  assertEquals(await terminal.exitCode(), 2);
  assertStringIncludes(terminal.output, "Invalid value for slack.bot_token: nothing was typed");
});

Deno.test("mcp start on a terminal says it speaks MCP on stdin/stdout and how to start HTTP", async () => {
  await using tmp = await tempHome();
  await using terminal = new Terminal(["mcp", "start"], { TOOLGATE_HOME: tmp.home });
  await terminal.waitFor("toolgate mcp start --transport http");
  assertStringIncludes(
    terminal.output,
    "toolgate: speaking MCP (JSON-RPC) on stdin/stdout for an MCP host such as Claude Desktop " +
      "or Cursor; to serve REST, MCP over HTTP and webhooks instead run: " +
      "toolgate mcp start --transport http",
  );
  await terminal.type("\x04"); // Ctrl-D: the end of stdin ends the server.
  assertEquals(await terminal.exitCode(), 0, terminal.output);
});
