/**
 * Policies: ordered rules that decide a tool call before it runs — `allow`,
 * `deny` (`FORBIDDEN` naming the rule) or `require_approval` — matched on
 * the tool, its plugin and annotations, the caller, the virtual server, the
 * transport, and a CEL expression over the arguments (npm `@bufbuild/cel`,
 * loaded only when a rule has one). Config's rules come first, then the
 * stored ones (`toolgate policies add`); the first that matches decides; a
 * call none matches is allowed.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../audit/canonical_json.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller, PolicyCall, PolicyDecision, PolicyGuard } from "../gateway/mod.ts";
import { matchesToolPatterns } from "../gateway/mod.ts";
import type { PolicyRecord } from "../store/mod.ts";
import { type PolicyRule, PolicyRuleSchema } from "./rule.ts";

/** Where a rule comes from. */
export type RuleSource = "config" | "store";

/** What `policies test` shows of each rule it looked at. */
export interface RuleTrace {
  name: string;
  source: RuleSource;
  matched: boolean;
  /** Why it matched or not: the first matcher that failed, or the expression's result. */
  why: string;
}

type Program = (bindings: Record<string, unknown>) => unknown;

interface CelModule {
  parse(expr: string): unknown;
  plan(env: unknown, ast: unknown): Program;
  celEnv(): unknown;
  isCelError(value: unknown): value is Error;
}

/** The MCP defaults of tool annotations (a tool that says nothing may do anything). */
function hints(annotations: Record<string, unknown> | undefined): Record<string, boolean> {
  const a = annotations ?? {};
  const readOnly = a.readOnlyHint === true;
  return {
    readOnlyHint: readOnly,
    destructiveHint: readOnly ? false : a.destructiveHint !== false,
    idempotentHint: a.idempotentHint === true,
    openWorldHint: a.openWorldHint !== false,
  };
}

/** Whether `caller` is one of `selectors` (`admin`, `key:<id or name>`, `scope:<scope>`, …). */
export function callerMatches(caller: Caller | undefined, selectors: readonly string[]): boolean {
  const who = caller ?? { kind: "local" as const };
  return selectors.some((selector) => {
    const at = selector.indexOf(":");
    if (at < 0) return selector === who.kind;
    const kind = selector.slice(0, at);
    const value = selector.slice(at + 1);
    switch (kind) {
      case "key":
        return who.kind === "key" && (who.id === value || who.name === value);
      case "oauth":
        return who.kind === "oauth" && who.id === value;
      case "client":
        return who.kind === "oauth" && who.name === value;
      case "scope":
        return who.scopes?.includes(value) === true;
      default:
        return false;
    }
  });
}

/** The caller as CEL sees it. */
function celCaller(caller: Caller | undefined): Record<string, unknown> {
  const who = caller ?? { kind: "local" as const };
  return {
    kind: who.kind,
    id: who.id ?? "",
    name: who.name ?? "",
    scopes: [...who.scopes ?? []],
  };
}

/** What a rule's expression sees of `call`. */
function celBindings(call: PolicyCall): Record<string, unknown> {
  return {
    args: call.args,
    caller: celCaller(call.caller),
    tool: { name: call.tool, plugin: call.plugin, annotations: hints(call.annotations) },
    server: call.server ?? "",
    transport: call.transport,
  };
}

/** Tools whose candidate rules are remembered (a server offers far fewer). */
const CANDIDATES_CACHED = 1024;

/** A rule ready to match. */
export class CompiledRule {
  readonly rule: PolicyRule;
  readonly source: RuleSource;
  /** SHA-256 (hex) of the rule's canonical JSON: its version, which approvals are bound to. */
  readonly sha256: string;
  #when: Program | undefined;
  #cel: CelModule | undefined;

  /** @throws {GatewayError} `CONFIG_INVALID` naming the rule and the position of a bad expression. */
  constructor(rule: PolicyRule, source: RuleSource, cel: CelModule | undefined) {
    this.rule = rule;
    this.source = source;
    this.sha256 = createHash("sha256").update(canonicalJson(rule)).digest("hex");
    if (rule.when !== undefined) {
      this.#cel = cel!;
      try {
        this.#when = cel!.plan(cel!.celEnv(), cel!.parse(rule.when));
      } catch (error) {
        throw new GatewayError(
          "CONFIG_INVALID",
          `Invalid policy ${rule.name} (${source}): when: ${
            (error as Error).message.replace(/^<input>:/, "line:column ")
          }`,
          { details: { policy: rule.name, when: rule.when } },
        );
      }
    }
  }

  /** Whether the rule may match a call of `tool` (its tool patterns alone). */
  coversTool(tool: string): boolean {
    return !this.rule.tools || matchesToolPatterns(tool, this.rule.tools);
  }

  /**
   * Whether the rule matches `call`, and why (or why not).
   *
   * @param bindings What its expression sees (made once per call by the caller). @default made here
   */
  match(
    call: PolicyCall,
    bindings: () => Record<string, unknown> = () => celBindings(call),
  ): { matched: boolean; why: string } {
    const { rule } = this;
    if (!this.coversTool(call.tool)) {
      return { matched: false, why: `tool ${call.tool} is not one of ${rule.tools!.join(", ")}` };
    }
    if (rule.plugins && !rule.plugins.includes(call.plugin)) {
      return {
        matched: false,
        why: `plugin ${call.plugin} is not one of ${rule.plugins.join(", ")}`,
      };
    }
    if (rule.annotations) {
      const effective = hints(call.annotations);
      for (const [hint, wanted] of Object.entries(rule.annotations)) {
        if (effective[hint] !== wanted) {
          return { matched: false, why: `${hint} is ${effective[hint]}, the rule wants ${wanted}` };
        }
      }
    }
    if (rule.callers && !callerMatches(call.caller, rule.callers)) {
      return { matched: false, why: `the caller is not one of ${rule.callers.join(", ")}` };
    }
    if (rule.servers && (call.server === undefined || !rule.servers.includes(call.server))) {
      return {
        matched: false,
        why: `the call is ${
          call.server === undefined ? "on no" : `on the ${call.server}`
        } virtual server`,
      };
    }
    if (
      rule.transports &&
      !rule.transports.some((t) =>
        t === call.transport || (t === "mcp" && call.transport.startsWith("mcp-"))
      )
    ) {
      return {
        matched: false,
        why: `transport ${call.transport} is not one of ${rule.transports.join(", ")}`,
      };
    }
    if (this.#when) {
      const result = this.#when(bindings());
      if (this.#cel!.isCelError(result)) {
        // An expression that cannot be evaluated: an allow rule does not match, the others do.
        const matched = rule.effect !== "allow";
        return {
          matched,
          why: `when failed (${result.message}): ${matched ? "matches" : "no match"}`,
        };
      }
      if (result !== true) return { matched: false, why: `when is ${String(result)}` };
      return { matched: true, why: "when is true" };
    }
    return { matched: true, why: "every matcher holds" };
  }
}

/** Config's rules and the stored ones, compiled, in order. */
export class Policies implements PolicyGuard {
  #rules: readonly CompiledRule[];
  /** Per tool name, the rules whose tool patterns cover it (the others never match its calls). */
  #candidates = new Map<string, readonly CompiledRule[]>();

  /** @param rules In order: config's, then the store's. */
  constructor(rules: readonly CompiledRule[]) {
    this.#rules = rules;
  }

  /** Takes `next`'s rules (the stored ones changed): calls from now on are decided by them. */
  replace(next: Policies): void {
    this.#rules = next.#rules;
    this.#candidates = new Map();
  }

  #candidatesOf(tool: string): readonly CompiledRule[] {
    let found = this.#candidates.get(tool);
    if (!found) {
      found = this.#rules.filter((rule) => rule.coversTool(tool));
      if (this.#candidates.size >= CANDIDATES_CACHED) this.#candidates.clear();
      this.#candidates.set(tool, found);
    }
    return found;
  }

  /** Whether any rule is set (the gateway asks only then). */
  get active(): boolean {
    return this.#rules.length > 0;
  }

  /** The rules, in order. */
  get rules(): readonly CompiledRule[] {
    return this.#rules;
  }

  /** The rule that decides `call`, or `undefined` (allowed: no rule matched). */
  decide(call: PolicyCall): PolicyDecision | undefined {
    let bindings: Record<string, unknown> | undefined;
    const made = () => bindings ??= celBindings(call);
    for (const rule of this.#candidatesOf(call.tool)) {
      if (rule.match(call, made).matched) return decisionOf(rule);
    }
    return undefined;
  }

  /** What {@linkcode Policies.decide} decides and each rule it looked at, for `policies test`. */
  explain(call: PolicyCall): { decision: PolicyDecision | undefined; trace: RuleTrace[] } {
    const trace: RuleTrace[] = [];
    for (const rule of this.#rules) {
      const { matched, why } = rule.match(call);
      trace.push({ name: rule.rule.name, source: rule.source, matched, why });
      if (matched) return { decision: decisionOf(rule), trace };
    }
    return { decision: undefined, trace };
  }
}

function decisionOf(compiled: CompiledRule): PolicyDecision {
  const { rule } = compiled;
  return {
    policy: rule.name,
    source: compiled.source,
    effect: rule.effect,
    sha256: compiled.sha256,
    ...(rule.reason ? { reason: rule.reason } : {}),
    ...(rule.approver ? { approver: rule.approver } : {}),
    ...(rule.approvers ? { approvers: rule.approvers } : {}),
    ...(rule.timeout !== undefined ? { timeoutMs: rule.timeout } : {}),
  };
}

/**
 * Parses a stored rule.
 *
 * @throws {GatewayError} `STORE_CORRUPT` naming it when it does not parse.
 */
export function storedRule(record: PolicyRecord): PolicyRule {
  const parsed = PolicyRuleSchema.safeParse(record.rule);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored policy ${record.name} is invalid: ${
        issue.path.join(".") || "(rule)"
      }: ${issue.message}; ` +
        `remove it with toolgate policies remove ${record.name} and add it again`,
      { details: { policy: record.name } },
    );
  }
  return parsed.data;
}

/**
 * Compiles config's rules and the stored ones (the CEL evaluator is loaded
 * only when one has `when`).
 *
 * @throws {GatewayError} `CONFIG_INVALID` naming a rule whose expression
 * does not parse (with its position), or a stored rule under the name of a
 * config rule; `STORE_CORRUPT` for a stored rule that does not parse.
 */
export async function loadPolicies(
  configured: readonly PolicyRule[],
  stored: readonly PolicyRecord[],
): Promise<Policies> {
  const names = new Set(configured.map((rule) => rule.name));
  const rules: { rule: PolicyRule; source: RuleSource }[] = configured.map((rule) => ({
    rule,
    source: "config",
  }));
  for (const record of stored) {
    if (names.has(record.name)) {
      throw new GatewayError(
        "CONFIG_INVALID",
        `Policy ${record.name} is defined in config and in the store: rename one ` +
          `(toolgate policies remove ${record.name})`,
        { details: { policy: record.name } },
      );
    }
    rules.push({ rule: storedRule(record), source: "store" });
  }
  const cel = rules.some(({ rule }) => rule.when !== undefined)
    ? await import("@bufbuild/cel") as unknown as CelModule
    : undefined;
  return new Policies(rules.map(({ rule, source }) => new CompiledRule(rule, source, cel)));
}
