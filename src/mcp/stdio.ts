/**
 * MCP over stdio: stdout carries only JSON-RPC; logs go to stderr.
 *
 * @module
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Gateway } from "../gateway/mod.ts";
import { createMcpServer } from "./server.ts";

/**
 * Serves the gateway on stdin/stdout until stdin closes or `signal` aborts.
 *
 * @returns Resolves when the session ended.
 */
export async function serveStdio(gateway: Gateway, signal?: AbortSignal): Promise<void> {
  const { server, detach } = createMcpServer(gateway, { source: "mcp-stdio" });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  const endOnStdinClose = () => void server.close();
  const stdin = (globalThis as unknown as { process: { stdin: NodeStdin } }).process.stdin;
  stdin.on("end", endOnStdinClose);
  stdin.on("close", endOnStdinClose);
  signal?.addEventListener("abort", endOnStdinClose, { once: true });
  await server.connect(transport);
  try {
    await closed;
  } finally {
    detach();
    stdin.off("end", endOnStdinClose);
    stdin.off("close", endOnStdinClose);
    signal?.removeEventListener("abort", endOnStdinClose);
  }
}

interface NodeStdin {
  on(event: string, listener: () => void): void;
  off(event: string, listener: () => void): void;
}
