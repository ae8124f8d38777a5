/**
 * Preloaded (`deno run --preload`) into the npm servers the benchmarks start
 * on HTTP (supergateway, the reference servers), whose `listen(port)` binds
 * every interface: a `listen` given a port and no host binds 127.0.0.1
 * instead. Nothing else changes. Private to `scripts/bench`; see
 * `loopbackNpmServerArgs` in `_mcp_http.ts`.
 *
 * @module
 */
import net from "node:net";

const LOOPBACK = "127.0.0.1";
const listen = net.Server.prototype.listen;

function isPort(value: unknown): boolean {
  return typeof value === "number" || (typeof value === "string" && /^\d+$/.test(value));
}

net.Server.prototype.listen = function listenOnLoopback(this: net.Server, ...args: unknown[]) {
  const [first, second] = args;
  if (isPort(first) && typeof second !== "string") {
    args.splice(1, 0, LOOPBACK);
  } else if (
    first !== null && typeof first === "object" && "port" in first && !("host" in first) &&
    !("path" in first)
  ) {
    args[0] = { ...first, host: LOOPBACK };
  }
  return listen.apply(this, args as Parameters<typeof listen>);
} as typeof listen;
