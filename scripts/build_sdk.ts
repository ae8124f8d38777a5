/**
 * `deno task build:sdk [outdir]`: builds the TypeScript SDK for Node 20 (and
 * any ESM runtime): `sdk/typescript/dist/mod.js`, one ES module with the MCP
 * SDK client inlined (no npm install needed), and a `package.json`.
 *
 * Deno users import `sdk/typescript/mod.ts` directly and need no build.
 *
 * @module
 */
import denoJson from "../deno.json" with { type: "json" };

const root = new URL("..", import.meta.url).pathname;
const outdir = Deno.args[0] ?? `${root}sdk/typescript/dist`;

await Deno.mkdir(outdir, { recursive: true });
const bundled = await new Deno.Command(Deno.execPath(), {
  args: [
    "bundle",
    "--platform",
    "deno",
    "--packages",
    "bundle",
    "--format",
    "esm",
    "-o",
    `${outdir}/mod.js`,
    `${root}sdk/typescript/mod.ts`,
  ],
  stdout: "inherit",
  stderr: "inherit",
}).output();
if (bundled.code !== 0) {
  console.error(`build_sdk: deno bundle failed with exit code ${bundled.code}`);
  Deno.exit(bundled.code);
}

const packageJson = {
  name: "@toolgate/sdk",
  version: denoJson.version,
  description: "Client SDK for toolgate: call its tools over MCP, subscribe to its events",
  type: "module",
  main: "./mod.js",
  exports: { ".": "./mod.js" },
  engines: { node: ">=20" },
  sideEffects: false,
};
await Deno.writeTextFile(`${outdir}/package.json`, JSON.stringify(packageJson, null, 2) + "\n");
console.error(`build_sdk: wrote ${outdir}/mod.js and ${outdir}/package.json`);
