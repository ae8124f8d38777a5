/**
 * Approvals: calls a policy holds until a person decides (the caller in the
 * call, or someone else through the CLI, REST, the console or Slack).
 *
 * @module
 */
export {
  approvalPath,
  ApprovalPending,
  Approvals,
  approvalView,
  argsSha256,
  callerRef,
} from "./approvals.ts";
export type { ApprovalAudit, ApprovalsOptions, ApprovalView, HoldOptions } from "./approvals.ts";
export { runApprovedCalls } from "./runner.ts";
export type { ApprovedCallRunnerOptions } from "./runner.ts";
export {
  APPROVAL_NOTICE_SOURCE,
  approvalMessage,
  approvalsPlugin,
  slackNotifier,
} from "./slack.ts";
