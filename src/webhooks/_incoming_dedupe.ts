/**
 * De-duplication of incoming payloads: which delivery id a request carries,
 * how long it is remembered, and the answer to one seen before. Private to
 * `src/webhooks`.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { GatewayError } from "../errors/mod.ts";
import type { IncomingWebhook } from "../store/mod.ts";

/** How long a sender's delivery id is remembered (`dedupe_header`): 24 hours. */
export const DEDUPE_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * After how long a delivery id whose payload was never accepted (the accept
 * failed, or the process died before confirming it) is free again.
 */
export const DEDUPE_STALE_MS = 60_000;

/** Longest delivery id kept as it is; a longer one is kept as its SHA-256. */
const DEDUPE_ID_MAX_CHARS = 200;

/**
 * The sender's delivery id of a request, when the endpoint de-duplicates:
 * its `dedupe_header`, else a verified Standard Webhooks `webhook-id`;
 * trimmed, and kept as its SHA-256 when very long.
 */
export function dedupeId(
  endpoint: IncomingWebhook,
  headers: Headers,
  signedId: string | undefined,
): string | undefined {
  const value = (endpoint.dedupe_header ? headers.get(endpoint.dedupe_header) : signedId)?.trim();
  if (!value) return undefined;
  if (value.length <= DEDUPE_ID_MAX_CHARS) return value;
  return `sha256:${createHash("sha256").update(value).digest("hex")}`;
}

/** The answer to a payload whose delivery id was seen: nothing runs again. */
export function duplicate(
  endpoint: IncomingWebhook,
  deliveryId: string,
  seen: { job_id: string; confirmed: boolean },
): Response {
  if (!seen.confirmed) {
    // The first payload is still being accepted: if that fails, this retry must run.
    throw new GatewayError(
      "UNAVAILABLE",
      `A payload with ${endpoint.dedupe_header ?? "webhook-id"} ${deliveryId} is being ` +
        `accepted right now: retry`,
      { details: { retry_after_s: 1 } },
    );
  }
  return Response.json({ id: seen.job_id, status: "duplicate" }, { status: 200 });
}
