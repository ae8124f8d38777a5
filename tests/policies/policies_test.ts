/**
 * Policy tables: each matcher and effect, first match decides, CEL over the
 * arguments and the caller, expression errors at load (naming the rule and
 * the position) and at evaluation (fail closed), and the config schema's
 * messages.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import type { Caller, PolicyCall } from "../../src/gateway/mod.ts";
import {
  callerMatches,
  loadPolicies,
  type PolicyRuleInput,
  PolicyRulesSchema,
} from "../../src/policies/mod.ts";

function rules(input: PolicyRuleInput[]) {
  return PolicyRulesSchema.parse(input);
}

const KEY: Caller = { kind: "key", id: "key_01", name: "ci" };
const OAUTH: Caller = { kind: "oauth", id: "alice", name: "cursor", scopes: ["tools:write"] };

function call(extra: Partial<PolicyCall> = {}): PolicyCall {
  return {
    tool: "github__create_issue",
    plugin: "github",
    annotations: { destructiveHint: false },
    caller: KEY,
    transport: "rest",
    args: { repo: "acme/site", title: "Hi" },
    ...extra,
  };
}

Deno.test("each matcher decides on its own, and an unmatched call is allowed", async () => {
  const table: [PolicyRuleInput, Partial<PolicyCall>, boolean][] = [
    [{ name: "r", tools: ["github__*"], effect: "deny" }, {}, true],
    [{ name: "r", tools: ["slack_*", "memory_?et"], effect: "deny" }, {}, false],
    [{ name: "r", plugins: ["github"], effect: "deny" }, {}, true],
    [{ name: "r", plugins: ["memory"], effect: "deny" }, {}, false],
    [{ name: "r", annotations: { destructiveHint: false }, effect: "deny" }, {}, true],
    [{ name: "r", annotations: { destructiveHint: true }, effect: "deny" }, {}, false],
    // MCP's defaults: a tool that says nothing may destroy and reaches the open world.
    [{ name: "r", annotations: { destructiveHint: true }, effect: "deny" }, {
      annotations: undefined,
    }, true],
    [
      { name: "r", annotations: { openWorldHint: true }, effect: "deny" },
      { annotations: {} },
      true,
    ],
    [
      { name: "r", annotations: { destructiveHint: true }, effect: "deny" },
      { annotations: { readOnlyHint: true, destructiveHint: true } },
      false,
    ],
    [{ name: "r", callers: ["key:ci"], effect: "deny" }, {}, true],
    [{ name: "r", callers: ["key:key_01"], effect: "deny" }, {}, true],
    [{ name: "r", callers: ["key"], effect: "deny" }, {}, true],
    [{ name: "r", callers: ["admin", "oauth"], effect: "deny" }, {}, false],
    [{ name: "r", callers: ["oauth:alice"], effect: "deny" }, { caller: OAUTH }, true],
    [{ name: "r", callers: ["client:cursor"], effect: "deny" }, { caller: OAUTH }, true],
    [{ name: "r", callers: ["scope:tools:write"], effect: "deny" }, { caller: OAUTH }, true],
    [{ name: "r", callers: ["scope:tools:admin"], effect: "deny" }, { caller: OAUTH }, false],
    [{ name: "r", callers: ["local"], effect: "deny" }, { caller: undefined }, true],
    [{ name: "r", servers: ["team-a"], effect: "deny" }, { server: "team-a" }, true],
    [{ name: "r", servers: ["team-a"], effect: "deny" }, {}, false],
    [{ name: "r", transports: ["mcp"], effect: "deny" }, { transport: "mcp-http" }, true],
    [{ name: "r", transports: ["mcp-stdio"], effect: "deny" }, { transport: "mcp-http" }, false],
    [{ name: "r", transports: ["rest", "cli"], effect: "deny" }, {}, true],
    [{ name: "r", when: "args.repo.startsWith('acme/')", effect: "deny" }, {}, true],
    [{ name: "r", when: "args.title.size() > 10", effect: "deny" }, {}, false],
    [{
      name: "r",
      when: "caller.kind == 'oauth' && 'tools:write' in caller.scopes",
      effect: "deny",
    }, {
      caller: OAUTH,
    }, true],
    [
      {
        name: "r",
        when: "tool.plugin == 'github' && !tool.annotations.readOnlyHint",
        effect: "deny",
      },
      {},
      true,
    ],
    [{ name: "r", when: "transport == 'rest' && server == ''", effect: "deny" }, {}, true],
    [{ name: "r", tools: ["github__*"], callers: ["key:other"], effect: "deny" }, {}, false],
  ];
  for (const [rule, extra, denied] of table) {
    const policies = await loadPolicies(rules([rule]), []);
    const decision = policies.decide(call(extra));
    assertEquals(
      decision?.effect === "deny",
      denied,
      `${JSON.stringify(rule)} on ${JSON.stringify(extra)}`,
    );
  }
  assertEquals((await loadPolicies([], [])).decide(call()), undefined);
  assertEquals((await loadPolicies([], [])).active, false);
});

Deno.test("the first matching rule decides: allow before deny, stored rules after config's", async () => {
  const policies = await loadPolicies(
    rules([
      { name: "ci-may", callers: ["key:ci"], tools: ["github__*"], effect: "allow" },
      { name: "no-github", tools: ["github__*"], effect: "deny", reason: "read-only week" },
    ]),
    [{
      name: "ask",
      rule: { name: "ask", effect: "require_approval", approvers: ["admin"], timeout: "10m" },
      position: 0,
      created_at: "2026-12-04T00:00:00.000Z",
      updated_at: "2026-12-04T00:00:00.000Z",
    }],
  );
  assertEquals(policies.decide(call())?.policy, "ci-may");
  const denied = policies.decide(call({ caller: OAUTH }))!;
  assertEquals([denied.policy, denied.effect, denied.reason], [
    "no-github",
    "deny",
    "read-only week",
  ]);
  const asked = policies.decide(call({ tool: "memory_set", plugin: "memory", caller: OAUTH }))!;
  assertEquals([asked.policy, asked.source, asked.effect, asked.timeoutMs], [
    "ask",
    "store",
    "require_approval",
    600_000,
  ]);
  assertEquals(asked.sha256.length, 64);
  const { trace } = policies.explain(call({ caller: OAUTH }));
  assertEquals(trace.map((t) => [t.name, t.matched]), [["ci-may", false], ["no-github", true]]);
  assertStringIncludes(trace[0].why, "the caller is not one of key:ci");
});

Deno.test("a rule's version changes with the rule, not with key order", async () => {
  const [a] = (await loadPolicies(rules([{ name: "r", tools: ["x"], effect: "deny" }]), [])).rules;
  const [b] = (await loadPolicies(rules([{ effect: "deny", tools: ["x"], name: "r" }]), [])).rules;
  const [c] = (await loadPolicies(rules([{ name: "r", tools: ["y"], effect: "deny" }]), [])).rules;
  assertEquals(a.sha256, b.sha256);
  assert(a.sha256 !== c.sha256);
});

Deno.test("a bad expression is refused at load, naming the rule and the position", async () => {
  const error = await assertRejects(
    () =>
      loadPolicies(rules([{ name: "hosts", when: "args.url.startsWith(", effect: "deny" }]), []),
    GatewayError,
  );
  assertEquals(error.code, "CONFIG_INVALID");
  assertStringIncludes(error.message, "Invalid policy hosts (config): when: line:column 1:");
  const clash = await assertRejects(
    () =>
      loadPolicies(rules([{ name: "r", effect: "deny" }]), [{
        name: "r",
        rule: { name: "r", effect: "allow" },
        position: 0,
        created_at: "x",
        updated_at: "x",
      }]),
    GatewayError,
  );
  assertStringIncludes(clash.message, "defined in config and in the store");
  const stored = await assertRejects(
    () =>
      loadPolicies([], [{
        name: "s",
        rule: { name: "s", effect: "maybe" },
        position: 0,
        created_at: "x",
        updated_at: "x",
      }]),
    GatewayError,
  );
  assertEquals(stored.code, "STORE_CORRUPT");
});

Deno.test("an expression that fails on a call: deny and approval rules match, allow rules do not", async () => {
  const missing = "args.host.endsWith('.example.com')";
  const deny = await loadPolicies(rules([{ name: "d", when: missing, effect: "deny" }]), []);
  assertEquals(deny.decide(call())?.policy, "d");
  assertStringIncludes(deny.explain(call()).trace[0].why, "when failed");
  const allow = await loadPolicies(rules([{ name: "a", when: missing, effect: "allow" }]), []);
  assertEquals(allow.decide(call()), undefined);
});

Deno.test("the config schema names what is wrong in a rule", () => {
  const problems = (input: unknown) => {
    const parsed = PolicyRulesSchema.safeParse(input);
    return parsed.success
      ? []
      : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  };
  assertEquals(problems([{ name: "a", effect: "require_approval" }]), [
    '0.approver: require_approval needs approver: "caller" or approvers: [...], one of them',
  ]);
  assertEquals(problems([{ name: "a", effect: "deny", approvers: ["admin"] }]), [
    "0.approvers: only a require_approval rule takes approver, approvers and timeout (effect is deny)",
  ]);
  assertStringIncludes(
    problems([{ name: "a", effect: "deny", callers: ["bob"] }])[0],
    "callers.0:",
  );
  assertStringIncludes(
    problems([{ name: "a", effect: "require_approval", approver: "caller", timeout: "soon" }])[0],
    '0.timeout: "soon" is not a duration',
  );
  assertEquals(problems([{ name: "a", effect: "deny" }, { name: "a", effect: "allow" }]), [
    "1.name: another rule is named a: names must be unique",
  ]);
});

Deno.test("callerMatches reads each selector kind", () => {
  assert(callerMatches({ kind: "admin" }, ["admin"]));
  assert(!callerMatches({ kind: "admin" }, ["local", "key"]));
  assert(callerMatches(undefined, ["local"]));
  assert(callerMatches(KEY, ["key:ci"]) && callerMatches(KEY, ["key:key_01"]));
  assert(!callerMatches(KEY, ["oauth:key_01"]));
});
