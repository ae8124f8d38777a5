import {
  Catalog,
  type CatalogSource,
  type PluginDefinition,
  templatePattern,
} from "../../src/gateway/mod.ts";
import { testGateway } from "./_fixtures.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { assert, assertEquals, assertRejects } from "../_asserts.ts";

type Entry = {
  kind: string;
  tool: string;
  caller?: unknown;
  input: unknown;
  outcome: Record<string, unknown>;
};

function recorder() {
  const entries: Entry[] = [];
  return { entries, audit: { append: (entry: Entry) => Promise.resolve(entries.push(entry)) } };
}

function source(name: string, extra: Partial<CatalogSource> = {}): CatalogSource {
  return {
    prompts: [{
      name: `${name}__greet`,
      ownName: "greet",
      info: { description: `greets from ${name}` },
      get: (args) => Promise.resolve({ messages: [{ role: "user", content: args }] }),
    }],
    resources: [{ uri: `${name}://readme`, name: "readme" }],
    templates: [{ uriTemplate: `${name}://items/{id}`, name: "item" }],
    read: (uri) => Promise.resolve({ contents: [{ uri, text: `${name} has ${uri}` }] }),
    ...extra,
  };
}

Deno.test("templatePattern() matches one segment for {var} and anything for {+var}", () => {
  assert(templatePattern("a://items/{id}").test("a://items/7"));
  assert(!templatePattern("a://items/{id}").test("a://items/7/x"));
  assert(templatePattern("file:///{+path}").test("file:///etc/hosts"));
  assert(!templatePattern("a.b://{id}").test("aXb://1"), "literal parts are not patterns");
});

Deno.test("Catalog routes prompts by name and reads by listed URI or template, and audits each", async () => {
  const { entries, audit } = recorder();
  const catalog = new Catalog({ audit, timeoutMs: 1000 });
  const changes: string[] = [];
  catalog.onChanged((change) => changes.push(change));
  catalog.set("one", source("one"));
  catalog.set("two", source("two"));
  assertEquals(changes, ["prompts", "resources", "prompts", "resources"]);
  assertEquals(catalog.listPrompts().map((prompt) => prompt.name), ["one__greet", "two__greet"]);

  const prompt = await catalog.getPrompt("two__greet", { who: "x" }, {
    sessionId: "ses_1",
    caller: { kind: "key", name: "ci", id: "key_1", tools: ["two__*"] },
  });
  assertEquals(prompt, { messages: [{ role: "user", content: { who: "x" } }] });
  assertEquals(await catalog.readResource("one://readme"), {
    contents: [{ uri: "one://readme", text: "one has one://readme" }],
  });
  assertEquals(await catalog.readResource("two://items/9"), {
    contents: [{ uri: "two://items/9", text: "two has two://items/9" }],
  });
  await assertRejects(() => catalog.readResource("three://x"), GatewayError, "not found");
  await assertRejects(() => catalog.getPrompt("nope", {}), GatewayError, "Unknown prompt: nope");
  assertEquals(entries.map((entry) => [entry.kind, entry.tool, entry.outcome.ok]), [
    ["prompt.get", "two__greet", true],
    ["resource.read", "one://readme", true],
    ["resource.read", "two://items/9", true],
  ]);
  // Who asked is recorded as an audit caller (no patterns); without one, none.
  assertEquals(entries[0].caller, { kind: "key", name: "ci", id: "key_1" });
  assertEquals(entries[1].caller, undefined);

  catalog.set("one", undefined);
  assertEquals(catalog.listPrompts().map((prompt) => prompt.name), ["two__greet"]);
  // The same source again changes nothing.
  changes.length = 0;
  catalog.set("two", source("two"));
  assertEquals(changes, []);
});

Deno.test("Catalog: a slow plugin fails with TOOL_TIMEOUT, a failing one with its error, both audited", async () => {
  const { entries, audit } = recorder();
  const catalog = new Catalog({ audit, timeoutMs: 30 });
  catalog.set(
    "slow",
    source("slow", {
      read: (_uri, signal) =>
        new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
    }),
  );
  catalog.set(
    "bad",
    source("bad", {
      read: () => Promise.reject(new GatewayError("PLUGIN_REQUEST_FAILED", "Upstream bad: down")),
    }),
  );
  const slow = await assertRejects(() => catalog.readResource("slow://readme"), GatewayError);
  assertEquals(slow.code, "TOOL_TIMEOUT");
  const bad = await assertRejects(() => catalog.readResource("bad://readme"), GatewayError);
  assertEquals(bad.code, "PLUGIN_REQUEST_FAILED");
  assertEquals(entries.map((entry) => [entry.tool, entry.outcome.error_code]), [
    ["slow://readme", "TOOL_TIMEOUT"],
    ["bad://readme", "PLUGIN_REQUEST_FAILED"],
  ]);
});

Deno.test("a plugin whose prompt name another plugin offers first is refused at start, naming both", async () => {
  const offering = (name: string): PluginDefinition => ({
    name,
    version: "1.0.0",
    zeroConfig: true,
    tools: [],
    initialize(context) {
      context.setCatalog({
        prompts: [{
          name: "review",
          ownName: "review",
          info: {},
          get: () => Promise.resolve({ messages: [] }),
        }],
        resources: [],
        templates: [],
        read: () => Promise.reject(new Error("none")),
      });
    },
  });
  await using t = await testGateway({ plugins: [offering("first"), offering("second")] });
  const [first, second] = t.gateway.listPlugins();
  assertEquals(first.state, "ready");
  assertEquals([second.state, second.error_code], ["error", "PLUGIN_INIT_FAILED"]);
  assertEquals(
    second.error,
    "Plugin second offers names that are taken: prompt review (plugin first); " +
      "rename them (rename) or keep the second__ prefix",
  );
  assertEquals(t.gateway.catalog.listPrompts().map((prompt) => prompt.name), ["review"]);
});

Deno.test("Catalog.subscribe asks the owning plugin once per URI, fans its updates out, and stops after the last watcher", async () => {
  const asked: string[] = [];
  const catalog = new Catalog({ timeoutMs: 1000 });
  catalog.set(
    "a",
    source("a", {
      subscribe: (uri) => Promise.resolve(void asked.push(`subscribe ${uri}`)),
      unsubscribe: (uri) => Promise.resolve(void asked.push(`unsubscribe ${uri}`)),
    }),
  );
  catalog.set("b", source("b"));
  const got: string[] = [];
  const stopOne = await catalog.subscribe("a://readme", () => got.push("one"));
  const stopTwo = await catalog.subscribe("a://items/7", () => got.push("two"));
  const stopThree = await catalog.subscribe("a://readme", () => got.push("three"));
  assertEquals(asked, ["subscribe a://readme", "subscribe a://items/7"]);
  catalog.updated("a", "a://readme");
  catalog.updated("b", "a://readme"); // another plugin cannot speak for a's resource
  assertEquals(got, ["one", "three"]);
  stopOne();
  stopOne();
  assertEquals(asked.length, 2, "a watcher is left");
  stopThree();
  stopTwo();
  await Promise.resolve();
  assertEquals(asked.slice(2), ["unsubscribe a://readme", "unsubscribe a://items/7"]);
  catalog.updated("a", "a://readme");
  assertEquals(got, ["one", "three"]);

  const unknown = await assertRejects(() => catalog.subscribe("c://x", () => {}), GatewayError);
  assertEquals(unknown.code, "NOT_FOUND");
  const unsupported = await assertRejects(
    () => catalog.subscribe("b://readme", () => {}),
    GatewayError,
  );
  assertEquals(unsupported.code, "PLUGIN_REQUEST_FAILED");
});

Deno.test("Catalog.subscribe: a plugin that refuses leaves nothing watched, and the next watcher asks again", async () => {
  let refuse = true;
  let asked = 0;
  const catalog = new Catalog({ timeoutMs: 1000 });
  catalog.set(
    "a",
    source("a", {
      subscribe: () => {
        asked++;
        return refuse
          ? Promise.reject(new GatewayError("PLUGIN_REQUEST_FAILED", "refused"))
          : Promise.resolve();
      },
      unsubscribe: () => Promise.resolve(),
    }),
  );
  await assertRejects(() => catalog.subscribe("a://readme", () => {}), GatewayError);
  refuse = false;
  await catalog.subscribe("a://readme", () => {});
  assertEquals(asked, 2);
});

Deno.test("a prompt its plugin holds back (pinning) is not listed, and a get is refused with why", async () => {
  const { audit } = recorder();
  const catalog = new Catalog({ audit, timeoutMs: 1000 });
  const withheld = new GatewayError("TOOL_QUARANTINED", "Prompt one__greet is quarantined");
  const held = source("one");
  held.prompts = [{ ...held.prompts[0], withheld }];
  catalog.set("one", held);
  assertEquals(catalog.listPrompts(), []);
  assertEquals(catalog.promptNames("one"), []);
  const error = await assertRejects(() => catalog.getPrompt("one__greet", {}), GatewayError);
  assertEquals(error.code, "TOOL_QUARANTINED");
});
