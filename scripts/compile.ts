/**
 * `deno task compile`: builds the single `toolgate` executable in `dist/`.
 *
 * `deno compile` downloads Deno's runtime base (denort) unless `DENORT_BIN`
 * points at a local copy; the variable is passed through unchanged. Extra
 * arguments (e.g. `--target x86_64-apple-darwin`) are forwarded.
 *
 * @module
 */

const root = new URL("..", import.meta.url).pathname;
const args = [
  "compile",
  "-A",
  "--unstable-kv",
  "--include",
  `${root}deno.json`,
  "-o",
  `${root}dist/toolgate`,
  ...Deno.args,
  `${root}main.ts`,
];
const denort = Deno.env.get("DENORT_BIN");
console.error(
  denort
    ? `compile: using runtime base from DENORT_BIN=${denort}`
    : "compile: DENORT_BIN not set; deno compile will download the runtime base",
);
const { code } = await new Deno.Command(Deno.execPath(), {
  args,
  stdout: "inherit",
  stderr: "inherit",
}).output();
Deno.exit(code);
