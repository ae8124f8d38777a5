import { assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { ROOT, tempHome } from "../_helpers.ts";
import { startHttpServer } from "../e2e/_http_server.ts";

/** Reads a child's stdout line by line, waiting for a line that matches. */
class Lines {
  #reader: ReadableStreamDefaultReader<string>;
  #buffer = "";
  readonly seen: string[] = [];

  constructor(stream: ReadableStream<Uint8Array>) {
    this.#reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** The first line (seen before or still to come) that matches; fails after `timeoutMs`. */
  async until(pattern: RegExp, timeoutMs = 10_000): Promise<string> {
    const earlier = this.seen.find((line) => pattern.test(line));
    if (earlier !== undefined) return earlier;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no line matching ${pattern}; saw:\n${this.seen.join("\n")}`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.#next(pattern), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #next(pattern: RegExp): Promise<string> {
    for (;;) {
      const newline = this.#buffer.indexOf("\n");
      if (newline >= 0) {
        const line = this.#buffer.slice(0, newline);
        this.#buffer = this.#buffer.slice(newline + 1);
        this.seen.push(line);
        if (pattern.test(line)) return line;
        continue;
      }
      const { done, value } = await this.#reader.read();
      if (done) throw new Error(`stdout ended before ${pattern}; saw:\n${this.seen.join("\n")}`);
      this.#buffer += value;
    }
  }

  async rest(): Promise<string> {
    let text = this.#buffer;
    for (;;) {
      const { done, value } = await this.#reader.read();
      if (done) return text;
      text += value;
    }
  }
}

async function post(url: string, tool: string, args: unknown): Promise<number> {
  const response = await fetch(`${url}/tools/${tool}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(args),
  });
  await response.body?.cancel();
  return response.status;
}

Deno.test("examples/agent.ts runs over HTTP and over stdio", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home });
  const run = (env: Record<string, string>) =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--cached-only", `${ROOT}examples/agent.ts`],
      env: { NO_COLOR: "1", ...env },
      stdout: "piped",
      stderr: "piped",
    }).output();

  const http = await run({ TOOLGATE_URL: server.url });
  const httpOut = new TextDecoder().decode(http.stdout);
  assertEquals(http.code, 0, new TextDecoder().decode(http.stderr));
  assertMatch(httpOut, /^\d+ tools: .*memory_set/m);
  assertStringIncludes(httpOut, 'memory_get -> {"key":"agent:last_run","found":true');
  assertStringIncludes(httpOut, "expected failure: TOOL_INPUT_INVALID: Invalid arguments");
  assertMatch(httpOut, /^event: memory_get finished: \d+ ms$/m);
  assertStringIncludes(httpOut, "event: memory_get finished: TOOL_INPUT_INVALID");

  const stdio = await run({ TOOLGATE_HOME: `${tmp.home}/stdio` });
  const stdioOut = new TextDecoder().decode(stdio.stdout);
  assertEquals(stdio.code, 0, new TextDecoder().decode(stdio.stderr));
  assertStringIncludes(stdioOut, "memory_get -> ");
  assertStringIncludes(stdioOut, "expected failure: TOOL_INPUT_INVALID");
  assertEquals((await server.stop()).code, 0);
});

Deno.test("examples/dashboard.ts prints latencies and failures of calls as they happen", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({
    home: tmp.home,
    config: { tools: { circuit_threshold: 1, circuit_reset_ms: 60_000 } },
  });
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", `${ROOT}examples/dashboard.ts`],
    env: { TOOLGATE_URL: server.url, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const lines = new Lines(child.stdout);
  try {
    await lines.until(/^dashboard: watching http:\/\/127\.0\.0\.1:\d+\/events/);
    assertEquals(await post(server.url, "memory_set", { key: "k", value: 1 }), 200);
    assertMatch(
      await lines.until(/ ok +memory_set/),
      /^\d\d:\d\d:\d\d\.\d{3} {2}ok +memory_set +\d+ ms {2}\[memory_set: 1 ok, 0 failed, [\d.]+ ms avg\]$/,
    );
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const closed = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}/`;
    listener.close();
    assertEquals(await post(server.url, "http_request", { url: closed }), 502);
    assertMatch(
      await lines.until(/FAILED +http_request/),
      /PLUGIN_REQUEST_FAILED \(attempt 1, circuit open\) {2}\[http_request: 0 ok, 1 failed/,
    );
    assertMatch(await lines.until(/CIRCUIT OPEN/), /http_request after 1 failures/);
  } finally {
    child.kill("SIGTERM");
  }
  assertStringIncludes(await lines.rest(), "dashboard: stopped");
  assertEquals((await child.status).code, 0, await stderr);
  assertEquals((await server.stop()).code, 0);
});
