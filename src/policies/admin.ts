/**
 * What `toolgate policies add|list|remove|test` and REST `/policies` share:
 * the rules as listed, adding a checked rule to the store, removing one,
 * and resolving who a test call is made as.
 *
 * @module
 */
import { keyCaller } from "../auth/api_keys.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller } from "../gateway/mod.ts";
import type { Store } from "../store/mod.ts";
import { CompiledRule, loadPolicies, type RuleSource } from "./policies.ts";
import { type PolicyRule, PolicyRuleSchema } from "./rule.ts";

/** A rule as listed. */
export interface PolicyView {
  name: string;
  source: RuleSource;
  /** Among the stored rules: where it goes (lower first). */
  position?: number;
  /** SHA-256 of its canonical JSON: the version approvals are bound to. */
  sha256: string;
  rule: Record<string, unknown>;
}

/** Every rule in the order they are matched: config's, then the store's. */
export async function listPolicies(
  configured: readonly PolicyRule[],
  store: Store,
): Promise<PolicyView[]> {
  const stored = await store.policies.list();
  const policies = await loadPolicies(configured, stored);
  const positions = new Map(stored.map((record) => [record.name, record]));
  return policies.rules.map((compiled) => {
    const record = positions.get(compiled.rule.name);
    return {
      name: compiled.rule.name,
      source: compiled.source,
      ...(compiled.source === "store" && record ? { position: record.position } : {}),
      sha256: compiled.sha256,
      rule: compiled.source === "store" && record ? record.rule : { ...compiled.rule },
    };
  });
}

/**
 * Checks `input` as a rule (its structure, then its expression) and stores
 * it after the stored rules (or at `position`).
 *
 * @throws {GatewayError} `USAGE` naming the field that is wrong,
 * `CONFIG_INVALID` with the position of a bad expression, `CONFLICT` when a
 * rule of that name exists (in config or the store).
 */
export async function addPolicy(
  configured: readonly PolicyRule[],
  store: Store,
  input: unknown,
  position?: number,
): Promise<PolicyView> {
  const parsed = PolicyRuleSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new GatewayError(
      "USAGE",
      `Invalid rule: ${issue.path.length ? `${issue.path.join(".")}: ` : ""}${issue.message} ` +
        "(see docs/policies.md for the fields)",
      { details: { field: issue.path.join(".") } },
    );
  }
  const rule = parsed.data;
  if (configured.some((other) => other.name === rule.name)) {
    throw new GatewayError(
      "CONFLICT",
      `A policy named ${rule.name} is defined in config; choose another name`,
      { details: { name: rule.name } },
    );
  }
  // Its expression compiles, or it is not stored.
  const cel = rule.when === undefined ? undefined : await import("@bufbuild/cel");
  const compiled = new CompiledRule(rule, "store", cel as never);
  const stored = await store.policies.list();
  const now = new Date().toISOString();
  const record = await store.policies.add({
    name: rule.name,
    rule: input as Record<string, unknown>,
    position: position ?? (stored.length ? Math.max(...stored.map((r) => r.position)) + 1 : 0),
    created_at: now,
    updated_at: now,
  });
  return {
    name: record.name,
    source: "store",
    position: record.position,
    sha256: compiled.sha256,
    rule: record.rule,
  };
}

/**
 * Removes a stored rule.
 *
 * @throws {GatewayError} `CONFLICT` for a config rule, `NOT_FOUND` for none.
 */
export async function removePolicy(
  configured: readonly PolicyRule[],
  store: Store,
  name: string,
): Promise<void> {
  if (configured.some((rule) => rule.name === name)) {
    throw new GatewayError(
      "CONFLICT",
      `Policy ${name} is defined in config: remove it from the configuration file`,
      { details: { name } },
    );
  }
  if (!await store.policies.remove(name)) {
    throw new GatewayError(
      "NOT_FOUND",
      `No stored policy named ${name} (toolgate policies list shows them)`,
      { details: { name } },
    );
  }
}

/**
 * Who a test call is made as: `admin`, `local`, an API key by id or name,
 * or `oauth:<subject>` (with `scopes`).
 *
 * @throws {GatewayError} `USAGE` for an unknown key.
 */
export async function testCaller(
  store: Store,
  as: string | undefined,
  scopes: readonly string[] = [],
): Promise<Caller> {
  if (as === undefined || as === "local") return { kind: "local" };
  if (as === "admin") return { kind: "admin" };
  if (as.startsWith("oauth:")) {
    const [subject, client] = as.slice("oauth:".length).split("@");
    return { kind: "oauth", id: subject, name: client ?? subject, scopes: [...scopes] };
  }
  const key = await store.apiKeys.get(as) ?? await store.apiKeys.getByName(as);
  if (!key) {
    throw new GatewayError(
      "USAGE",
      `Invalid --as ${JSON.stringify(as)}: no API key with that id or name; use admin, local, ` +
        "oauth:<subject>[@client] or a key (toolgate keys list shows them)",
    );
  }
  return keyCaller(key);
}
