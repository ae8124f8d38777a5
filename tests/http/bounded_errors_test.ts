/**
 * Error messages stay bounded whatever the input: 50 000 unknown keys in a
 * tool call or a management request name at most 20 of them, then how many
 * more, in the message and in `details.fields`.
 */
import { z } from "zod";
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { webhookRoutes } from "../../src/http/mod.ts";
import { LOOPBACK_EGRESS, setup } from "../webhooks/_setup.ts";
import { postJson, testApp } from "./_fixtures.ts";

const MANY = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, 1]));

Deno.test("a tool call with 50 000 unknown keys: a short TOOL_INPUT_INVALID naming 20 of them", async () => {
  await using t = await testApp({
    plugins: [{
      name: "strict",
      version: "1.0.0",
      zeroConfig: true,
      tools: [{
        name: "strict_tool",
        description: "Takes only a key",
        input: z.strictObject({ key: z.string() }),
        execute: () => Promise.resolve({}),
      }],
    }],
  });
  const response = await postJson(t.app, "/tools/strict_tool", { key: "a", ...MANY });
  assertEquals(response.status, 400);
  const text = await response.text();
  assert(text.length < 4000, `${text.length} bytes`);
  const body = JSON.parse(text);
  assertEquals(body.error.code, "TOOL_INPUT_INVALID");
  assertMatch(body.error.message, /Unrecognized keys: "k0", .*"k19" and 49980 more$/);
  assertEquals(body.error.details.fields.length, 1);
});

Deno.test("a management request with 50 000 unknown keys: a short USAGE naming 20 of them", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [webhookRoutes(env.store, { egress: LOOPBACK_EGRESS })],
  });
  const response = await postJson(t.app, "/webhooks", { url: "https://example.com/h", ...MANY });
  assertEquals(response.status, 400);
  const text = await response.text();
  assert(text.length < 4000, `${text.length} bytes`);
  assertMatch(JSON.parse(text).error.message, /and 49980 more/);
  assertEquals(await env.store.webhooks.listOutgoing(), []);
});
