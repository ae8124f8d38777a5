import { assertEquals, assertStringIncludes } from "../_asserts.ts";
import { ROOT } from "../_helpers.ts";

Deno.test("prefetch: a registry that cannot be reached fails at once, saying what to set", async () => {
  const cache = await Deno.makeTempDir({ prefix: "toolgate-prefetch-test-" });
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close();
  try {
    const run = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--cached-only", `${ROOT}scripts/prefetch.ts`],
      cwd: ROOT,
      // An empty cache and a registry nothing listens on.
      env: { DENO_DIR: cache, NPM_CONFIG_REGISTRY: `http://127.0.0.1:${port}/`, NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(run.stderr);
    assertEquals(run.code, 1, stderr);
    assertStringIncludes(
      stderr,
      `prefetch: the npm registry http://127.0.0.1:${port}/ could not be reached; nothing was tested.`,
    );
    assertStringIncludes(stderr, "Behind a proxy: set HTTPS_PROXY");
    assertStringIncludes(stderr, "DENO_CERT=/path/to/ca.pem");
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});
