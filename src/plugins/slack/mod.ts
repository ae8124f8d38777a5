/**
 * The `slack` plugin: post messages and list channels through the Slack Web
 * API with a bot token from the keychain (`slack.bot_token`).
 *
 * Without the token the plugin is `not_configured` (`PLUGIN_NOT_CONFIGURED`).
 * Slack's `{"ok": false, "error": "…"}` answers, HTTP errors and connection
 * errors are `PLUGIN_REQUEST_FAILED` carrying Slack's error text. The token is
 * read on every call (a new one takes effect without a restart) and never
 * appears in errors, logs or outputs.
 *
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../../errors/mod.ts";
import type { PluginDefinition, ToolContext } from "../../gateway/mod.ts";
import { VERSION } from "../../version.ts";
import { describeFetchError } from "../_fetch_error.ts";

/** The keychain key of the bot token (`slack.bot_token`). */
export const SLACK_TOKEN_KEY = "bot_token";

const PostMessageInput = z.strictObject({
  channel: z.string().min(1).describe("Channel id (C…) or name (#general)"),
  text: z.string().min(1).max(40_000).describe("Message text (Slack mrkdwn)"),
  thread_ts: z.string().regex(
    /^\d+\.\d+$/,
    "Invalid thread_ts: expected a Slack ts like 1700000000.000100",
  )
    .optional().describe("Reply in the thread of this message ts"),
  blocks: z.array(z.record(z.string(), z.unknown())).max(50).optional().describe(
    "Block Kit blocks (text is then the notification fallback)",
  ),
});

const ListChannelsInput = z.strictObject({
  limit: z.number().int().min(1).max(1000).optional().describe(
    "At most this many channels, 1–1000 (default 100)",
  ),
  cursor: z.string().min(1).optional().describe("next_cursor of a previous call"),
  types: z.string().regex(
    /^(public_channel|private_channel|mpim|im)(,(public_channel|private_channel|mpim|im))*$/,
  )
    .optional().describe(
      "Comma-separated: public_channel, private_channel, mpim, im (default public_channel)",
    ),
  exclude_archived: z.boolean().optional().describe("Leave archived channels out (default true)"),
});

const SlackResponseSchema = z.looseObject({
  ok: z.boolean(),
  error: z.string().optional(),
});

const PostMessageResponseSchema = z.looseObject({
  channel: z.string(),
  ts: z.string(),
});

const ChannelSchema = z.looseObject({
  id: z.string(),
  name: z.string().optional(),
  is_private: z.boolean().optional(),
  is_archived: z.boolean().optional(),
  is_member: z.boolean().optional(),
  num_members: z.number().optional(),
  topic: z.looseObject({ value: z.string().optional() }).optional(),
  purpose: z.looseObject({ value: z.string().optional() }).optional(),
});

const ListChannelsResponseSchema = z.looseObject({
  channels: z.array(ChannelSchema),
  response_metadata: z.looseObject({ next_cursor: z.string().optional() }).optional(),
});

const HINTS: Record<string, string> = {
  invalid_auth:
    "the bot token was rejected; set a new one with toolgate keychain set slack.bot_token",
  not_authed: "no bot token was sent; set one with toolgate keychain set slack.bot_token",
  account_inactive: "the token's workspace or user is deactivated",
  token_revoked:
    "the bot token was revoked; set a new one with toolgate keychain set slack.bot_token",
  channel_not_found: "no such channel, or the bot cannot see it",
  not_in_channel: "invite the bot to the channel first",
  missing_scope: "the bot token lacks a scope this method needs",
  ratelimited: "Slack is rate limiting this app",
};

async function token(context: ToolContext): Promise<string> {
  const value = await context.secrets.get(SLACK_TOKEN_KEY);
  if (!value) {
    throw new GatewayError(
      "PLUGIN_NOT_CONFIGURED",
      "Plugin slack is not configured: slack.bot_token is missing; set it with toolgate keychain set slack.bot_token",
    );
  }
  return value;
}

/** Removes the token from text that may echo it (it never should). */
function scrub(text: string, secret: string): string {
  return secret ? text.replaceAll(secret, "[REDACTED]") : text;
}

function slackFailed(
  method: string,
  reason: string,
  details: Record<string, unknown>,
  cause?: unknown,
) {
  return new GatewayError("PLUGIN_REQUEST_FAILED", `Slack ${method} failed: ${reason}`, {
    details: { method, ...details },
    cause,
  });
}

/** Calls one Web API method and returns its parsed `ok: true` body. */
async function callSlack(
  context: ToolContext,
  method: string,
  request: { json?: Record<string, unknown>; query?: Record<string, string> },
): Promise<Record<string, unknown>> {
  const secret = await token(context);
  const base = context.config.plugins.slack.api_base_url.replace(/\/+$/, "");
  const url = new URL(`${base}/${method}`);
  for (const [name, value] of Object.entries(request.query ?? {})) {
    url.searchParams.set(name, value);
  }
  const headers: Record<string, string> = {
    authorization: `Bearer ${secret}`,
    "user-agent": `toolgate/${VERSION}`,
  };
  if (request.json) headers["content-type"] = "application/json; charset=utf-8";
  let response: Response;
  try {
    response = await fetch(url, {
      method: request.json ? "POST" : "GET",
      headers,
      body: request.json ? JSON.stringify(request.json) : undefined,
      signal: context.signal,
    });
  } catch (error) {
    if (context.signal.aborted) throw context.signal.reason ?? error;
    const reason = scrub(describeFetchError(error, url), secret);
    // The cause is dropped: it might echo request details.
    throw slackFailed(method, `cannot reach ${url.host}: ${reason}`, { host: url.host });
  }
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    if (context.signal.aborted) throw context.signal.reason ?? error;
    throw slackFailed(method, `reading the response from ${url.host} failed`, { host: url.host });
  }
  if (response.status === 429) {
    const retryAfter = response.headers.get("retry-after");
    throw slackFailed(
      method,
      `ratelimited: Slack is rate limiting this app${
        retryAfter ? `; retry after ${retryAfter} s` : ""
      }`,
      {
        slack_error: "ratelimited",
        status: 429,
        retry_after_s: retryAfter ? Number(retryAfter) : undefined,
      },
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw slackFailed(method, `HTTP ${response.status} from ${url.host} with a non-JSON body`, {
      status: response.status,
    });
  }
  const parsed = SlackResponseSchema.safeParse(body);
  if (!parsed.success) {
    throw slackFailed(
      method,
      `HTTP ${response.status} from ${url.host} is not a Slack API answer`,
      {
        status: response.status,
      },
    );
  }
  if (!parsed.data.ok) {
    const error = scrub(parsed.data.error ?? "unknown_error", secret);
    const hint = HINTS[error];
    throw slackFailed(method, hint ? `${error} (${hint})` : error, {
      slack_error: error,
      status: response.status,
    });
  }
  if (!response.ok) {
    throw slackFailed(method, `HTTP ${response.status} from ${url.host}`, {
      status: response.status,
    });
  }
  return parsed.data;
}

function invalidAnswer(method: string, error: z.ZodError): GatewayError {
  return slackFailed(
    method,
    `unexpected answer: ${error.issues[0]?.path.join(".")}: ${error.issues[0]?.message}`,
    {},
  );
}

/**
 * The `slack` plugin definition (needs `slack.bot_token`).
 *
 * @example
 * ```ts
 * await gateway.call("slack_post_message", { channel: "C0123", text: "Deployed" });
 * // { ok: true, channel: "C0123", ts: "1700000000.000100" }
 * ```
 */
export function slackPlugin(): PluginDefinition {
  return {
    name: "slack",
    version: VERSION,
    description: "Post messages and list channels in Slack (needs slack.bot_token)",
    zeroConfig: false,
    secrets: [SLACK_TOKEN_KEY],
    tools: [
      {
        name: "slack_post_message",
        description:
          "Post a message to a Slack channel (or a thread with thread_ts). Returns the channel and the message ts.",
        input: PostMessageInput,
        mcpListing: { annotations: { destructiveHint: false, openWorldHint: true } },
        async execute(args, context) {
          const { channel, text, thread_ts, blocks } = PostMessageInput.parse(args);
          const body = await callSlack(context, "chat.postMessage", {
            json: {
              channel,
              text,
              ...(thread_ts ? { thread_ts } : {}),
              ...(blocks ? { blocks } : {}),
            },
          });
          const answer = PostMessageResponseSchema.safeParse(body);
          if (!answer.success) throw invalidAnswer("chat.postMessage", answer.error);
          return {
            ok: true,
            channel: answer.data.channel,
            ts: answer.data.ts,
            ...(thread_ts ? { thread_ts } : {}),
          };
        },
      },
      {
        name: "slack_list_channels",
        description:
          "List Slack channels the bot can see (id, name, privacy, membership, topic), a page at a time; pass next_cursor back as cursor for more.",
        input: ListChannelsInput,
        idempotent: true,
        mcpListing: { annotations: { readOnlyHint: true, openWorldHint: true } },
        async execute(args, context) {
          const { limit = 100, cursor, types = "public_channel", exclude_archived = true } =
            ListChannelsInput.parse(args);
          const body = await callSlack(context, "conversations.list", {
            query: {
              limit: String(limit),
              types,
              exclude_archived: String(exclude_archived),
              ...(cursor ? { cursor } : {}),
            },
          });
          const answer = ListChannelsResponseSchema.safeParse(body);
          if (!answer.success) throw invalidAnswer("conversations.list", answer.error);
          const channels = answer.data.channels.map((channel) => ({
            id: channel.id,
            name: channel.name ?? null,
            is_private: channel.is_private ?? false,
            is_archived: channel.is_archived ?? false,
            is_member: channel.is_member ?? false,
            num_members: channel.num_members ?? null,
            topic: channel.topic?.value ?? "",
            purpose: channel.purpose?.value ?? "",
          }));
          return {
            channels,
            count: channels.length,
            next_cursor: answer.data.response_metadata?.next_cursor || null,
          };
        },
      },
    ],
  };
}
