/**
 * The verifiable log across processes: two instances on one PostgreSQL
 * database appending and publishing checkpoints to a real sink, the MCP
 * receipt, and a server killed with SIGKILL while appending. Everything is
 * checked with the independent verifier.
 *
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { assert, assertEquals } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { startPostgres } from "../_postgres.ts";
import { startHttpServer } from "./_http_server.ts";
import { leavesOf, memorySet } from "./_audit.ts";
import {
  fromBase64,
  openCheckpoint,
  rootFromLeaves,
  verifyConsistency,
  verifyReceipt,
} from "../audit/_independent_verifier.ts";

/** A checkpoint sink on 127.0.0.1: fails its first POST (the sender retries), keeps the rest. */
function sink() {
  const notes: string[] = [];
  let posts = 0;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const text = await request.text();
      if (posts++ === 0) return new Response(null, { status: 503 });
      notes.push(text);
      return new Response(null, { status: 204 });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/checkpoints`,
    notes,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

const SECRET_KEY = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));

Deno.test("two instances on PostgreSQL keep one verifiable log and publish its checkpoints to a sink", async () => {
  await using pg = await startPostgres();
  await using homeA = await tempHome();
  await using homeB = await tempHome();
  await using published = sink();
  const env = { TOOLGATE_DATABASE_URL: pg.url, TOOLGATE_SECRET_KEY: SECRET_KEY };
  const config = {
    audit: { checkpoint_interval: "100ms", checkpoints: { sinks: [{ url: published.url }] } },
    webhooks: { retry_base_ms: 100 },
  };
  await using a = await startHttpServer({ home: homeA.home, env, config });
  await using b = await startHttpServer({ home: homeB.home, env, config });
  const keyA = await (await fetch(`${a.url}/audit/key`)).json();
  const keyB = await (await fetch(`${b.url}/audit/key`)).json();
  assertEquals(keyA, keyB, "one key for the database");
  const keys = [keyA.verifier_key as string];
  await Promise.all(Array.from({ length: 60 }, (_, i) => memorySet(i % 2 ? a.url : b.url, i)));
  // The latest checkpoint covers all 60, from whichever instance made it.
  let latest = await openCheckpoint(await (await fetch(`${b.url}/audit/checkpoint`)).text(), keys);
  await until(async () => {
    latest = await openCheckpoint(await (await fetch(`${b.url}/audit/checkpoint`)).text(), keys);
    return latest.size === 60;
  }, "a checkpoint of 60 entries");
  const leaves = await leavesOf(a.url);
  assertEquals(leaves.length, 60);
  assertEquals(latest.root, await rootFromLeaves(leaves));
  // The sink got checkpoints (after a retry); each is consistent with the latest.
  await until(() => published.notes.length > 0, "a checkpoint at the sink");
  for (const note of published.notes) {
    const checkpoint = await openCheckpoint(note, keys);
    const proof =
      await (await fetch(`${a.url}/audit/proof/consistency?from=${checkpoint.size}&to=60`)).json();
    assertEquals(
      await verifyConsistency(
        checkpoint.size,
        60,
        checkpoint.root,
        latest.root,
        proof.hashes.map(fromBase64),
      ),
      true,
    );
  }
  const verified = await runCli(["audit", "verify"], { home: homeA.home, env });
  assertEquals(verified.code, 0, verified.stderr);
});

Deno.test("MCP results carry the receipt in _meta; a server killed while appending comes back verifiable", async () => {
  await using tmp = await tempHome();
  const first = await startHttpServer({
    home: tmp.home,
    config: { audit: { checkpoint_interval: "50ms" } },
  });
  const keys = [(await (await fetch(`${first.url}/audit/key`)).json()).verifier_key as string];
  {
    const transport = new StreamableHTTPClientTransport(new URL(`${first.url}/mcp`));
    const client = new Client({ name: "toolgate-e2e", version: "1.0.0" });
    await client.connect(transport);
    const result = await client.callTool({ name: "memory_set", arguments: { key: "m", value: 1 } });
    const receipt = (result._meta as Record<string, unknown>)["io.toolgate/receipt"];
    assert(receipt, "a receipt in _meta");
    assertEquals(await verifyReceipt(receipt as never, keys), true);
    await client.close();
  }
  // Calls in flight when the process dies.
  let stop = false;
  const load = Promise.all(Array.from({ length: 8 }, async (_, w) => {
    for (let i = 0; !stop; i++) await memorySet(first.url, w * 10_000 + i).catch(() => {});
  }));
  await until(async () => {
    const page = await (await fetch(`${first.url}/audit?limit=1`)).json();
    return page.chain.head_seq > 150;
  }, "150 entries");
  await first.stop("SIGKILL");
  stop = true;
  await load;
  const history = (await Deno.readTextFile(`${tmp.home}/checkpoints.log`)).trim().split("\n");
  assert(history.length >= 2, "checkpoints were published before the kill");
  // After the restart: chain, tree and every published checkpoint agree.
  const verified = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verified.code, 0, verified.stderr);
  await using second = await startHttpServer({ home: tmp.home });
  await memorySet(second.url, -1);
  const leaves = await leavesOf(second.url);
  const last = await openCheckpoint(JSON.parse(history.at(-1)!).note, keys);
  assert(last.size <= leaves.length);
  assertEquals(last.root, await rootFromLeaves(leaves.slice(0, last.size)));
});
