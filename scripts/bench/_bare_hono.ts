/**
 * Baseline for the REST scenario: a bare Hono app whose `POST /tools/:name`
 * parses the JSON body and answers a tool-result-shaped JSON, on
 * `Deno.serve`. Prints `{"port": n}` once listening; runs until stdin closes.
 *
 * `deno run -A scripts/bench/_bare_hono.ts [read|commit <kv_path>]`
 *
 * With `read`, the route also reads the key from a Deno KV file, as
 * toolgate's `memory_get` does. With `commit`, it reads and then writes one
 * record per request in its own commit before answering (`_bare_audit.ts`):
 * a durably audited call without group commit, for comparison with
 * toolgate's group commit.
 *
 * @module
 */
import { Hono } from "hono";
import { BareAuditLog } from "./_bare_audit.ts";

const [extra, kvPath] = Deno.args;
const kv = extra === "read" || extra === "commit" ? await Deno.openKv(kvPath) : undefined;
const audit = kv && extra === "commit" ? new BareAuditLog(kv) : undefined;

const app = new Hono();
app.post("/tools/:name", async (c) => {
  const args = await c.req.json<Record<string, unknown>>();
  const stored = kv && await kv.get(["memory", String(args.key)]);
  const output = stored?.value ? { key: args.key, found: true, value: stored.value } : {
    key: args.key,
    found: false,
  };
  await audit?.append(c.req.param("name"), args);
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
