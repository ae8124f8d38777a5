/**
 * Policies: ordered rules deciding each tool call before it runs (allow,
 * deny, require approval), matched on tool, plugin, annotations, caller,
 * virtual server, transport and a CEL expression over the arguments.
 *
 * @module
 */
export { addPolicy, listPolicies, removePolicy, testCaller } from "./admin.ts";
export type { PolicyView } from "./admin.ts";
export { callerMatches, CompiledRule, loadPolicies, Policies, storedRule } from "./policies.ts";
export type { RuleSource, RuleTrace } from "./policies.ts";
export {
  ANNOTATION_HINTS,
  CALLER_SELECTOR,
  DEFAULT_APPROVAL_TIMEOUT_MS,
  PolicyRuleSchema,
  PolicyRulesSchema,
} from "./rule.ts";
export type { PolicyRule, PolicyRuleInput } from "./rule.ts";
