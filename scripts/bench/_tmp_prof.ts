import { httpCalls } from "./mcp.ts";
import { spawnReady } from "./_proc.ts";
const home = await Deno.makeTempDir();
await Deno.remove("/tmp/prof", { recursive: true }).catch(() => {});
const server = await spawnReady({
  args: ["run", "-A", "--cpu-prof", "--cpu-prof-dir=/tmp/prof", "main.ts", "mcp", "start", "--transport", "http", "--port", "0"],
  env: { TOOLGATE_HOME: home, TOOLGATE_KEYCHAIN: "file" },
  ready: (out) => /listening on (http:\/\/[^\s]+:\d+) /.exec(out),
  stopSignal: "SIGTERM",
});
const r = await httpCalls(`${server.match[1]}/mcp`, 8, "full");
console.log(JSON.stringify(r).slice(0, 200));
await server.stop();
