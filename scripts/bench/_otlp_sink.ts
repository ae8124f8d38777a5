/**
 * An OTLP/HTTP endpoint that accepts and discards every export (traces,
 * metrics, logs, protobuf or JSON), for measuring what exporting costs the
 * process that exports. Prints `{"port": n}` once listening; runs until
 * stdin closes.
 *
 * `deno run -A scripts/bench/_otlp_sink.ts`
 *
 * @module
 */
let exports = 0;
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen: () => {} },
  async (request) => {
    await request.arrayBuffer();
    exports++;
    return new Response(null, { status: 200 });
  },
);
console.log(JSON.stringify({ port: server.addr.port }));
for await (const _ of Deno.stdin.readable) { /* until stdin closes */ }
console.error(`otlp sink: ${exports} exports`);
await server.shutdown();
