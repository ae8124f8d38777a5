/**
 * What `toolgate mcp start` on stdio loads before its first reply: the
 * modules `main.ts` reaches by static imports (`deno info --json`, dynamic
 * `import()` left out: it loads on first use). An MCP host spawns this path
 * for every session, so the HTTP stack, the console, the PostgreSQL driver,
 * OpenTelemetry, JOSE and the metrics client must stay off it until
 * configured or used, and the runtime loads only once the reply is on its way.
 */
import { assert, assertEquals } from "../_asserts.ts";
import { ROOT } from "../_helpers.ts";

interface Info {
  roots: string[];
  modules: {
    specifier: string;
    dependencies?: { code?: { specifier?: string }; isDynamic?: boolean }[];
  }[];
}

/** Every module `entry` reaches by static imports. */
async function staticGraph(entry: string): Promise<Set<string>> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(output.code, 0, new TextDecoder().decode(output.stderr));
  const info = JSON.parse(new TextDecoder().decode(output.stdout)) as Info;
  const bySpecifier = new Map(info.modules.map((module) => [module.specifier, module]));
  const seen = new Set<string>();
  const stack = [...info.roots];
  while (stack.length) {
    const specifier = stack.pop()!;
    if (seen.has(specifier)) continue;
    seen.add(specifier);
    for (const dependency of bySpecifier.get(specifier)?.dependencies ?? []) {
      const target = dependency.code?.specifier;
      if (target && !dependency.isDynamic) stack.push(target);
    }
  }
  return seen;
}

Deno.test("mcp start on stdio statically loads neither HTTP, console, PostgreSQL, OpenTelemetry, JOSE nor metrics", async () => {
  const graph = [...await staticGraph("main.ts")];
  assert(graph.some((specifier) => specifier.endsWith("/src/mcp/stdio.ts")), "the stdio server");
  const unwanted = [
    /^npm:\/?hono/,
    /^npm:\/?@hono\//,
    /^npm:\/?postgres@/,
    /^npm:\/?@opentelemetry\//,
    /^npm:\/?jose@/,
    /^npm:\/?prom-client@/,
    /\/src\/http\//,
    /\/src\/store\/postgres\/(connection|postgres_store|migrations)\.ts$/,
    /\/src\/metrics\//,
    /\/src\/tracing\/_otel\.ts$/,
    // The runtime (audit log, dispatcher, plugins) loads while `initialize` is answered.
    /\/src\/cli\/runtime\.ts$/,
    /\/src\/webhooks\/dispatcher\.ts$/,
    /\/src\/audit\/audit_log\.ts$/,
  ];
  const loaded = graph.filter((specifier) => unwanted.some((pattern) => pattern.test(specifier)));
  assertEquals(loaded, []);
});
