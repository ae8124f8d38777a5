import { assertEquals } from "../_asserts.ts";
import { createAuditLog, redact, REDACTED } from "../../src/audit/mod.ts";
import { readRaw, tempStore } from "./_store.ts";

Deno.test("redact() replaces the values of every sensitive key, whatever the case", () => {
  const keys = [
    "token",
    "access_token",
    "client_secret",
    "password",
    "PASSWD",
    "Authorization",
    "api_key",
    "X-Api-Key",
    "apikey",
    "Cookie",
    "private_key",
    "credentials",
  ];
  const input = Object.fromEntries(keys.map((key) => [key, "s3cr3t"]));
  assertEquals(redact(input), Object.fromEntries(keys.map((key) => [key, REDACTED])));
});

Deno.test("redact() reaches into nested objects and arrays and keeps other values", () => {
  const input = {
    channel: "#ops",
    headers: { Authorization: "Bearer x", accept: "json" },
    items: [{ name: "a", secret: { nested: true } }, 3, "plain"],
  };
  assertEquals(redact(input), {
    channel: "#ops",
    headers: { Authorization: REDACTED, accept: "json" },
    items: [{ name: "a", secret: REDACTED }, 3, "plain"],
  });
  assertEquals(input.headers.Authorization, "Bearer x", "the input is not modified");
});

Deno.test("append() stores the input and outcome redacted", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const entry = await log.append({
    kind: "webhook.incoming",
    tool: "notify",
    input: { event: "push", auth: { token: "t-1" }, list: [{ password: "p" }] },
    outcome: { accepted: true, endpoint_id: "in_1", api_key: "k" },
  });
  await log.close();
  const expected = {
    input: { auth: { token: REDACTED }, event: "push", list: [{ password: REDACTED }] },
    outcome: { accepted: true, api_key: REDACTED, endpoint_id: "in_1" },
  };
  assertEquals({ input: entry.input, outcome: entry.outcome }, expected);
  const stored = await readRaw(tmp.store, 1);
  assertEquals({ input: stored.input, outcome: stored.outcome }, expected);
});
