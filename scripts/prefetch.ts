/**
 * The first step of `deno task test`: caches, once and before the suite
 * starts, everything the tests and benchmarks load or run as processes, each
 * at the version its lock file pins:
 *
 * - the project's npm packages (`deno.lock`);
 * - the npm programs run as separate processes, the MCP reference servers and
 *   supergateway (`scripts/npm_servers/deno.lock`);
 * - esbuild, which `deno bundle` fetches on first use.
 *
 * Tests then run with `--cached-only`, so a test never downloads. When the
 * registry cannot be reached this fails here, with what to set, instead of in
 * dozens of tests.
 *
 * @module
 */
import { NPM_SERVERS_CONFIG } from "./npm_servers.ts";

const ROOT = new URL("..", import.meta.url).pathname;

interface Step {
  what: string;
  args: string[];
}

const scratch = await Deno.makeTempDir({ prefix: "toolgate-prefetch-" });
await Deno.writeTextFile(`${scratch}/empty.ts`, "export {};\n");

const STEPS: Step[] = [
  {
    what: "the project's npm packages (deno.lock)",
    args: [
      "cache",
      "--frozen",
      "--quiet",
      "main.ts",
      "src/",
      "tests/",
      "scripts/",
      "sdk/typescript/",
    ],
  },
  {
    what: "the MCP servers the tests run (scripts/npm_servers/deno.lock)",
    args: ["install", "--config", NPM_SERVERS_CONFIG, "--quiet"],
  },
  {
    what: "esbuild for deno bundle",
    args: ["bundle", "--quiet", "-o", `${scratch}/empty.js`, `${scratch}/empty.ts`],
  },
];

/** Words in Deno's errors that mean the registry was not reached. */
const NETWORK_ERROR =
  /error sending request|client error|connect|dns error|timed out|certificate|tls|proxy|failed to fetch|error getting response/i;

let failed = false;
try {
  for (const step of STEPS) {
    const started = Date.now();
    const { code, stderr } = await new Deno.Command(Deno.execPath(), {
      args: step.args,
      cwd: ROOT,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(stderr).trim();
    if (code === 0) {
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      console.error(`prefetch: ${step.what}: cached (${seconds} s)`);
      continue;
    }
    failed = true;
    console.error(text);
    console.error(`\nprefetch: could not cache ${step.what} (deno exited with ${code})`);
    if (NETWORK_ERROR.test(text)) console.error(unreachableHelp());
    break;
  }
} finally {
  await Deno.remove(scratch, { recursive: true });
}
if (failed) Deno.exit(1);

/** What to set when the registry cannot be reached. */
function unreachableHelp(): string {
  const registry = Deno.env.get("NPM_CONFIG_REGISTRY") ?? Deno.env.get("npm_config_registry") ??
    "https://registry.npmjs.org/";
  return [
    `prefetch: the npm registry ${registry} could not be reached; nothing was tested.`,
    "  Behind a proxy: set HTTPS_PROXY (and NO_PROXY=127.0.0.1,localhost).",
    "  With a company CA: set DENO_CERT=/path/to/ca.pem (Deno) and NODE_EXTRA_CA_CERTS (npm, npx).",
    "  With a registry mirror: set NPM_CONFIG_REGISTRY=<its URL>.",
    "  Then run deno task test again; see docs/troubleshooting.md.",
  ].join("\n");
}
