/**
 * The Python SDK's tests, as part of `deno task test`: runs pytest with
 * `/usr/bin/python3` (Debian's `python3-httpx` and `python3-pytest`), and
 * says how to install them when they are missing.
 *
 * @module
 */

const PYTHON = "/usr/bin/python3";
const root = new URL("..", import.meta.url).pathname;

const probe = await new Deno.Command(PYTHON, {
  args: ["-c", "import httpx, pytest"],
  stdout: "null",
  stderr: "null",
}).output().catch(() => ({ code: 127 }));
if (probe.code !== 0) {
  console.error(
    "test: the Python SDK tests need /usr/bin/python3 with httpx and pytest; install them with\n" +
      "  sudo apt-get install -y python3-httpx python3-pytest\n" +
      "(.ci/run installs them on CI machines)",
  );
  Deno.exit(1);
}
const { code } = await new Deno.Command(PYTHON, {
  args: ["-m", "pytest", "-q", `${root}sdk/python/tests`, ...Deno.args],
  cwd: root,
  // The tests start toolgate with this very Deno (with `npx deno` it may not be on PATH).
  env: { DENO: Deno.execPath() },
  stdout: "inherit",
  stderr: "inherit",
}).output();
Deno.exit(code);
