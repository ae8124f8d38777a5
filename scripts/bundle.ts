/**
 * `deno task bundle`: writes `dist/toolgate.js`, one self-contained JS file
 * holding the server, the CLI and the stdio transport (all npm code inlined).
 * Run it with `deno run -A --unstable-kv dist/toolgate.js <command>`.
 *
 * @module
 */

const root = new URL("..", import.meta.url).pathname;
const output = Deno.args[0] ?? `${root}dist/toolgate.js`;

const command = new Deno.Command(Deno.execPath(), {
  args: ["bundle", "--platform", "deno", "--packages", "bundle", "-o", output, `${root}main.ts`],
  stdout: "inherit",
  stderr: "inherit",
});
const { code } = await command.output();
if (code !== 0) {
  console.error(`bundle: deno bundle failed with exit code ${code}`);
  Deno.exit(code);
}
console.error(`bundle: wrote ${output}`);
