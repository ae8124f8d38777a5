/**
 * The shape of a policy rule, as config `policies` and `toolgate policies
 * add` give it. Checked here for structure; its CEL expression (`when`) is
 * compiled by {@link ./policies.ts} (which loads the CEL evaluator only when
 * a rule has one). Imports nothing above it: the config schema uses it.
 *
 * @module
 */
import { z } from "zod";
import { parseDuration } from "../duration.ts";

/** A tool glob: a name or a pattern of `A-Z a-z 0-9 _ . -` with `*` and `?`. */
const TOOL_GLOB = /^[A-Za-z0-9_.*?-]+$/;

/** A caller selector (see {@linkcode CALLER_SELECTOR}). */
export const CALLER_SELECTOR =
  /^(?:admin|local|key|oauth|slack|(?:key|oauth|client|scope|slack):[^\s]{1,256})$/;

/** The annotations a rule may match on (MCP `ToolAnnotations` hints). */
export const ANNOTATION_HINTS = [
  "readOnlyHint",
  "destructiveHint",
  "idempotentHint",
  "openWorldHint",
] as const;

/** Default approval timeout. */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 30 * 60 * 1000;

const duration = z.string().transform((raw, context) => {
  try {
    return parseDuration(raw);
  } catch {
    context.addIssue({
      code: "custom",
      message: `"${raw}" is not a duration: use a number and a unit (ms, s, m, h, d), e.g. "30m"`,
    });
    return z.NEVER;
  }
});

/**
 * One rule: what it matches (every given matcher must hold; none given
 * matches every call) and its effect. The first rule that matches decides;
 * a call no rule matches is allowed.
 */
export const PolicyRuleSchema = z.strictObject({
  /** Unique name: in messages, `FORBIDDEN` refusals, approvals and the audit log. */
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, {
    message: "expected 1-64 letters, digits, _ . -, starting with a letter or digit",
  }),
  /** Tool globs (`github__*`, `http_request`). */
  tools: z.array(
    z.string().regex(TOOL_GLOB, {
      message: "expected a tool name or pattern of A-Z a-z 0-9 _ . - with * and ?",
    }),
  ).min(1).optional(),
  /** Plugin names (`github`, `memory`). */
  plugins: z.array(z.string().min(1)).min(1).optional(),
  /** Tool annotations to match (MCP hints, their defaults applied: see docs/policies.md). */
  annotations: z.partialRecord(z.enum(ANNOTATION_HINTS), z.boolean()).optional(),
  /** Callers: `admin`, `local`, `key`, `key:<id or name>`, `oauth`, `oauth:<subject>`, `client:<client_id>`, `scope:<scope>`. */
  callers: z.array(
    z.string().regex(CALLER_SELECTOR, {
      message:
        "expected admin, local, key, oauth, slack, key:<id or name>, oauth:<subject>, client:<client_id>, scope:<scope> or slack:<user id>",
    }),
  ).min(1).optional(),
  /** Virtual servers the call comes through (`/mcp/<name>`, an API key bound to one). */
  servers: z.array(z.string().min(1)).min(1).optional(),
  /**
   * Transports: `rest`, `mcp` (either of `mcp-http`, `mcp-stdio`), `cli`,
   * `webhook` (an incoming payload's handler), `api` (an embedding program).
   */
  transports: z.array(z.enum(["rest", "mcp", "mcp-http", "mcp-stdio", "cli", "webhook", "api"]))
    .min(1).optional(),
  /** A CEL expression over `args`, `caller`, `tool`, `server` and `transport` that must be true. */
  when: z.string().min(1).max(4096).optional(),
  effect: z.enum(["allow", "deny", "require_approval"]),
  /** `require_approval`: the caller confirms it themself. */
  approver: z.literal("caller").optional(),
  /** `require_approval`: who may approve (caller selectors, as `callers`). */
  approvers: z.array(
    z.string().regex(CALLER_SELECTOR, {
      message:
        "expected admin, local, key, oauth, slack, key:<id or name>, oauth:<subject>, client:<client_id>, scope:<scope> or slack:<user id>",
    }),
  ).min(1).optional(),
  /** `require_approval`: how long a request waits for a decision. @default "30m" */
  timeout: duration.optional(),
  /** Why: in the refusal of `deny`, and shown to whoever approves. */
  reason: z.string().max(1024).optional(),
}).superRefine((rule, context) => {
  if (rule.effect === "require_approval") {
    if ((rule.approver === undefined) === (rule.approvers === undefined)) {
      context.addIssue({
        code: "custom",
        path: ["approver"],
        message: 'require_approval needs approver: "caller" or approvers: [...], one of them',
      });
    }
  } else if (rule.approver !== undefined || rule.approvers !== undefined || rule.timeout) {
    context.addIssue({
      code: "custom",
      path: [rule.approver !== undefined ? "approver" : rule.approvers ? "approvers" : "timeout"],
      message:
        `only a require_approval rule takes approver, approvers and timeout (effect is ${rule.effect})`,
    });
  }
});

/** A rule as given (its `timeout` still text). */
export type PolicyRuleInput = z.input<typeof PolicyRuleSchema>;

/** A checked rule (its `timeout` in ms). */
export type PolicyRule = z.output<typeof PolicyRuleSchema>;

/** The rule list of config `policies`: names unique. */
export const PolicyRulesSchema = z.array(PolicyRuleSchema).superRefine((rules, context) => {
  const seen = new Set<string>();
  for (const [i, rule] of rules.entries()) {
    if (seen.has(rule.name)) {
      context.addIssue({
        code: "custom",
        path: [i, "name"],
        message: `another rule is named ${rule.name}: names must be unique`,
      });
    }
    seen.add(rule.name);
  }
});
