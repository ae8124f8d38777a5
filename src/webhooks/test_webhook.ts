/**
 * `webhooks test <id>`: one signed `webhook.test` envelope, sent once.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { TEST_EVENT_TYPE } from "../events/mod.ts";
import { newId } from "../ids.ts";
import type { Store } from "../store/mod.ts";
import type { EgressPolicy } from "../egress/mod.ts";
import { type FetchLike, postWebhookTraced } from "./_send.ts";
import { WebhookSigner } from "./signer.ts";

/** Options of {@linkcode testWebhook}. */
export interface TestWebhookOptions {
  /** Fetch used for the request. @default globalThis.fetch */
  fetch?: FetchLike;
  /** Checks the receiver (profile `public`). @default a policy with an empty allow-list */
  egress?: EgressPolicy;
  /** Milliseconds to wait for a 2xx response. @default 10000 */
  timeoutMs?: number;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Text sent as `data.message`. @default "Test delivery from toolgate" */
  message?: string;
  /** Append the attempt to the webhook's delivery log. @default true */
  record?: boolean;
}

/** Outcome of {@linkcode testWebhook}. */
export interface TestWebhookResult {
  /** A 2xx response arrived within the timeout. */
  ok: boolean;
  /** HTTP status, when a response arrived. */
  status?: number;
  /** Why no response was accepted (timeout, connection error). */
  error?: string;
  /** Milliseconds until the response (or the failure). */
  latency_ms: number;
  /** The egress policy refused the receiver (`error` names the setting that allows it). */
  egress_denied?: boolean;
  /** Whether `X-Service-Signature` and `webhook-signature` headers were sent. */
  signed: boolean;
  /** Envelope id, also sent as `X-Service-Delivery`. */
  event_id: string;
}

/**
 * Sends one envelope of type `webhook.test` (`data: {webhook_id, message}`)
 * to a registered webhook, with the same headers as a delivery (signed when
 * it has a secret, also with unexpired previous secrets), without retries.
 *
 * @throws {GatewayError} `NOT_FOUND` when no outgoing webhook has that id.
 *
 * @example
 * ```ts
 * const result = await testWebhook(store, "wh_01j…");
 * console.log(result.ok ? `HTTP ${result.status} in ${result.latency_ms} ms` : result.error);
 * ```
 */
export async function testWebhook(
  store: Store,
  id: string,
  options: TestWebhookOptions = {},
): Promise<TestWebhookResult> {
  const {
    fetch = globalThis.fetch,
    timeoutMs = 10_000,
    now = Date.now,
    message = "Test delivery from toolgate",
    record = true,
  } = options;
  const hook = await store.webhooks.getOutgoing(id);
  if (!hook) throw new GatewayError("NOT_FOUND", `Cannot test webhook ${id}: no such webhook`);
  const startedAt = now();
  const envelope = {
    id: newId("evt"),
    type: TEST_EVENT_TYPE,
    timestamp: new Date(startedAt).toISOString(),
    data: { webhook_id: hook.id, message },
  };
  const body = new TextEncoder().encode(JSON.stringify(envelope));
  const timestamp = Math.floor(startedAt / 1000);
  const signed = hook.secret === undefined
    ? undefined
    : new WebhookSigner(hook.secret, hook.previous_secrets)
      .sign(envelope.id, timestamp, body, startedAt);
  // Its span is a child of whatever asked for the test (the request to the management API).
  const result = await postWebhookTraced({
    fetch,
    egress: options.egress,
    url: hook.url,
    body,
    eventType: TEST_EVENT_TYPE,
    deliveryId: envelope.id,
    signature: signed?.signature,
    timestamp,
    standardSignature: signed?.standardSignature,
    timeoutMs,
  }, { webhookId: hook.id, attempt: 1, root: false });
  if (record) {
    await store.deliveries.appendLog(hook.id, {
      at: envelope.timestamp,
      attempt: 1,
      ok: result.ok,
      ...(result.status !== undefined ? { status: result.status } : {}),
      ...(result.error !== undefined ? { error: result.error } : {}),
      latency_ms: result.duration_ms,
      event_id: envelope.id,
      event_type: TEST_EVENT_TYPE,
    });
  }
  return {
    ok: result.ok,
    ...(result.status !== undefined ? { status: result.status } : {}),
    ...(result.error !== undefined ? { error: result.error } : {}),
    latency_ms: result.duration_ms,
    ...(result.egressDenied ? { egress_denied: true } : {}),
    signed: signed !== undefined,
    event_id: envelope.id,
  };
}
