/**
 * Fetches the npm packages the tests and benchmarks run as separate
 * processes (the MCP reference servers, supergateway) into Deno's cache
 * once, before the suite starts. On a fresh machine, several test processes
 * would otherwise download the same packages at the same moment.
 *
 * @module
 */

const PACKAGES = [
  "npm:@modelcontextprotocol/server-everything@2026.8.31",
  "npm:@modelcontextprotocol/server-memory@2026.8.31",
  "npm:supergateway@4.0.0",
];

const { code } = await new Deno.Command(Deno.execPath(), {
  args: ["cache", "--no-config", "--no-lock", "--quiet", ...PACKAGES],
  stdout: "inherit",
  stderr: "inherit",
}).output();
if (code !== 0) {
  console.error(`prefetch: deno cache failed (exit ${code}); is the npm registry reachable?`);
}
Deno.exit(code);
