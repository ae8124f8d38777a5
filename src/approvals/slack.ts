/**
 * Approvals in Slack: with `approvals.slack_channel` set, each call held
 * for someone's approval is posted there (through the Slack plugin) with an
 * Approve and a Deny button. Slack sends a click to the app's interactivity
 * URL: an incoming endpoint verified with the `slack` scheme whose handler
 * is the built-in `approvals_decide` tool, which decides as
 * `slack:<user id>` (allowed when the approvers name `slack` or that user).
 *
 * @module
 */
import { z } from "zod";
import { canonicalJson } from "../audit/canonical_json.ts";
import { GatewayError } from "../errors/mod.ts";
import { ADMIN_CALLER, type Gateway, type PluginDefinition } from "../gateway/mod.ts";
import type { ApprovalRecord } from "../store/mod.ts";
import { VERSION } from "../version.ts";
import { approvalPath, type Approvals } from "./approvals.ts";

/** The source of toolgate's own approval notices: not subject to policies (they would hold themselves). */
export const APPROVAL_NOTICE_SOURCE = "approvals";

const InteractionSchema = z.looseObject({
  type: z.literal("block_actions", { error: "expected a Slack block_actions interaction" }),
  user: z.looseObject({ id: z.string().min(1), username: z.string().optional() }),
  actions: z.array(z.looseObject({
    action_id: z.enum(["approve", "deny"], {
      error: "expected the approve or deny button of a toolgate approval message",
    }),
    value: z.string().regex(/^apr_[0-9A-Za-z]+$/, { error: "expected an approval id (apr_…)" }),
  })).min(1),
});

/** The built-in `approvals` plugin: `approvals_decide`, the handler of Slack's button clicks. */
export function approvalsPlugin(approvals: Approvals): PluginDefinition {
  return {
    name: "approvals",
    version: VERSION,
    description: "Decides held calls from Slack's signed interaction callbacks",
    zeroConfig: true,
    tools: [{
      name: "approvals_decide",
      description: "Decides a held call from a Slack interaction payload (the Approve or Deny " +
        "button of toolgate's approval message). For an incoming endpoint verified with --verify " +
        "slack only; other callers are refused.",
      input: InteractionSchema,
      mcpListing: { annotations: { destructiveHint: false, openWorldHint: false } },
      async execute(args, context) {
        // Only a payload that came through an incoming endpoint, whose signature was checked.
        if (context.source !== "webhook") {
          throw new GatewayError(
            "FORBIDDEN",
            "Forbidden: approvals_decide decides from Slack's signed interactions only; " +
              "make it the handler of an incoming endpoint with --verify slack",
          );
        }
        const { user, actions } = InteractionSchema.parse(args);
        const [action] = actions;
        const record = await approvals.decide(
          action.value,
          action.action_id === "approve" ? "approved" : "denied",
          { by: `slack:${user.id}`, reason: `in Slack by ${user.username ?? user.id}` },
        );
        return { approval_id: record.id, status: record.status, decided_by: record.decided_by };
      },
    }],
  };
}

/** The message of a held call: what, by whom, why, and the two buttons. */
export function approvalMessage(record: ApprovalRecord): { text: string; blocks: unknown[] } {
  const who = String(record.caller.name ?? record.caller.id ?? record.caller.kind);
  const text = `Approval needed: ${record.tool} for ${who} (policy ${record.policy})`;
  const args = canonicalJson(record.args);
  return {
    text,
    blocks: [
      {
        type: "section",
        text: {
          type: "mrkdwn",
          text: `*${text}*${record.reason ? `\n${record.reason}` : ""}\n\`\`\`${
            args.length > 2800 ? `${args.slice(0, 2800)}…` : args
          }\`\`\`\nExpires ${record.expires_at} · ${approvalPath(record.id)}`,
        },
      },
      {
        type: "actions",
        block_id: record.id,
        elements: [
          {
            type: "button",
            action_id: "approve",
            style: "primary",
            text: { type: "plain_text", text: "Approve" },
            value: record.id,
          },
          {
            type: "button",
            action_id: "deny",
            style: "danger",
            text: { type: "plain_text", text: "Deny" },
            value: record.id,
          },
        ],
      },
    ],
  };
}

/** Posts each held call needing someone else's decision to `channel`. */
export function slackNotifier(
  gateway: Gateway,
  channel: string,
  log: (message: string) => void,
): (record: ApprovalRecord) => void {
  return (record) => {
    if (record.approvers.includes("caller")) return;
    gateway.call("slack_post_message", { channel, ...approvalMessage(record) }, {
      caller: ADMIN_CALLER,
      source: APPROVAL_NOTICE_SOURCE,
    }).catch((error) =>
      log(`approval ${record.id} not posted to Slack: ${(error as Error).message}`)
    );
  };
}
