/**
 * Baseline for the REST scenario: a bare Hono app whose `POST /tools/:name`
 * parses the JSON body and answers a tool-result-shaped JSON, on
 * `Deno.serve`. Prints `{"port": n}` once listening; runs until stdin closes.
 *
 * `deno run -A scripts/bench/_bare_hono.ts`
 *
 * @module
 */
import { Hono } from "hono";

const app = new Hono();
app.post("/tools/:name", async (c) => {
  const args = await c.req.json<Record<string, unknown>>();
  const output = { key: args.key, found: false };
  return c.json({
    content: [{ type: "text", text: JSON.stringify(output) }],
    structuredContent: output,
  });
});

const server = Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen: ({ port }) => console.log(JSON.stringify({ port })),
}, app.fetch);
for await (const _ of Deno.stdin.readable) { /* until stdin closes */ }
await server.shutdown();
