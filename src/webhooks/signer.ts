/**
 * HMAC-SHA256 signatures of outgoing webhook bodies (spec §5.1):
 * `sha256=<lowercase hex>` keyed with the webhook secret, over the exact bytes
 * sent.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHmac, timingSafeEqual } from "node:crypto";
import { HmacSha256Key } from "./_hmac_sha256.ts";

/** Prefix of a signature header value. */
export const SIGNATURE_PREFIX = "sha256=";

/** A signing secret prepared for repeated use ({@linkcode importSigningKey}). */
export type SigningKey = HmacSha256Key;

const encoder = new TextEncoder();

/**
 * Prepares a signing secret as an HMAC-SHA256 key (import once, sign many).
 *
 * Signing is synchronous and allocates nothing but its result
 * (`_hmac_sha256.ts`: the key's padded blocks are hashed here, once):
 * deliveries sign every attempt, twice.
 *
 * @param secret The webhook's signing secret (its UTF-8 bytes are the key).
 */
export function importSigningKey(secret: string): SigningKey {
  return new HmacSha256Key(encoder.encode(secret));
}

function keyOf(secret: string | SigningKey): SigningKey {
  return typeof secret === "string" ? importSigningKey(secret) : secret;
}

/**
 * Signs body bytes: `sha256=` and the lowercase hex HMAC-SHA256 digest.
 *
 * @param secret The signing secret, or a key from {@linkcode importSigningKey}.
 * @param body The raw body bytes exactly as sent.
 * @returns The `X-Service-Signature` header value.
 *
 * @example
 * ```ts
 * const body = new TextEncoder().encode('{"id":"evt_1"}');
 * const header = signPayload("s3cret", body); // "sha256=…"
 * ```
 */
export function signPayload(secret: string | SigningKey, body: Uint8Array): string {
  return SIGNATURE_PREFIX + keyOf(secret).digest("", body, "hex");
}

/**
 * Verifies a signature header against the raw body bytes, in constant time
 * (`timingSafeEqual` on the digests; the secret is never compared with `===`).
 *
 * @param secret The signing secret, or a key from {@linkcode importSigningKey}.
 * @param body The raw body bytes as received, before any parsing.
 * @param header The `X-Service-Signature` value (`sha256=<hex>`).
 * @returns Whether the signature is well-formed and matches.
 */
export function verifySignature(
  secret: string | SigningKey,
  body: Uint8Array,
  header: string | null | undefined,
): boolean {
  if (typeof header !== "string") return false;
  const value = header.trim();
  if (!value.startsWith(SIGNATURE_PREFIX)) return false;
  const hex = value.slice(SIGNATURE_PREFIX.length);
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return false;
  const expected = createHmac("sha256", keyOf(secret).bytes).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(hex, "hex"));
}

/** Prefix of a Standard Webhooks secret: the rest is the key, base64-encoded. */
export const STANDARD_SECRET_PREFIX = "whsec_";

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The key bytes of a secret under Standard Webhooks: the base64-decoded part
 * after `whsec_`, else (no prefix, or not base64 after it) the secret's UTF-8
 * bytes.
 *
 * @param secret The webhook's signing secret.
 * @returns The HMAC key bytes, or `undefined` for a `whsec_` secret whose rest is not base64.
 */
export function standardKeyBytes(secret: string): Uint8Array | undefined {
  if (!secret.startsWith(STANDARD_SECRET_PREFIX)) return encoder.encode(secret);
  const encoded = secret.slice(STANDARD_SECRET_PREFIX.length);
  if (!encoded.length || !BASE64.test(encoded)) return undefined;
  return new Uint8Array(Buffer.from(encoded, "base64"));
}

/**
 * Prepares a secret as the key of `webhook-signature` (import once, sign
 * many): see {@linkcode standardKeyBytes}; a `whsec_` secret that is not
 * base64 after the prefix is keyed with its whole UTF-8 bytes.
 *
 * @param secret The webhook's signing secret.
 */
export function importStandardKey(secret: string): SigningKey {
  return new HmacSha256Key(standardKeyBytes(secret) ?? encoder.encode(secret));
}

/**
 * Signs a delivery the Standard Webhooks way: `v1,` and the base64
 * HMAC-SHA256 of `<id>.<timestamp>.<body>`, one signature per key,
 * space-separated (a rotation's new secret first, then the previous ones).
 *
 * @param keys Keys from {@linkcode importStandardKey}.
 * @param id The `webhook-id` header (the event id).
 * @param timestamp The `webhook-timestamp` header (unix seconds).
 * @param body The raw body bytes exactly as sent.
 * @returns The `webhook-signature` header value.
 *
 * @example
 * ```ts
 * const key = importStandardKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
 * const body = new TextEncoder().encode('{"test": 2432232314}');
 * signStandard([key], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body); // "v1,g0hM9SsE…"
 * ```
 */
export function signStandard(
  keys: readonly SigningKey[],
  id: string,
  timestamp: number,
  body: Uint8Array,
): string {
  const prefix = `${id}.${timestamp}.`;
  let header = "";
  for (const key of keys) {
    const digest = key.digest(prefix, body, "base64");
    header += header ? ` v1,${digest}` : `v1,${digest}`;
  }
  return header;
}

/** The signature headers of one attempt (see {@linkcode WebhookSigner}). */
export interface AttemptSignatures {
  /**
   * `X-Service-Signature`: `sha256=<hex>` keyed with the oldest previous
   * secret still in its overlap, else with the current secret.
   */
  signature: string;
  /** `webhook-signature`: the current secret's, then each unexpired previous one's. */
  standardSignature: string;
}

/**
 * A webhook's signing keys, imported once when its registration is loaded.
 *
 * `webhook-signature` carries one signature per secret: the current one's,
 * then each previous (rotated-out) secret's until its overlap ends.
 * `X-Service-Signature` has room for one: during a rotation's overlap it
 * keeps the secret that receivers of the spec header still hold, the
 * oldest previous secret whose overlap has not ended; when the last
 * overlap ends it switches to the current secret.
 *
 * @example
 * ```ts
 * const signer = new WebhookSigner("whsec_new…", [
 *   { secret: "whsec_old…", expires_at: "2026-01-02T00:00:00.000Z" },
 * ]);
 * const body = new TextEncoder().encode('{"id":"evt_1"}');
 * // Before 2026-01-02: signature keyed with the old secret, standardSignature with both.
 * signer.sign("evt_1", 1767225600, body, Date.parse("2026-01-01T00:00:00Z"));
 * ```
 */
export class WebhookSigner {
  #spec: SigningKey;
  #current: SigningKey;
  /** Newest first, as stored: the last one still unexpired keys `X-Service-Signature`. */
  #previous: { spec: SigningKey; key: SigningKey; expiresAt: number }[];
  /** When the last previous secret expires (epoch ms), `-Infinity` without any. */
  #lastExpiry: number;

  /**
   * @param secret The current secret.
   * @param previous Secrets replaced by rotations, newest first, with the
   * end of their overlap (ISO 8601).
   */
  constructor(
    secret: string,
    previous: readonly { secret: string; expires_at: string }[] = [],
  ) {
    this.#spec = importSigningKey(secret);
    this.#current = importStandardKey(secret);
    this.#previous = previous.map((p) => ({
      spec: importSigningKey(p.secret),
      key: importStandardKey(p.secret),
      expiresAt: Date.parse(p.expires_at),
    }));
    this.#lastExpiry = Math.max(-Infinity, ...this.#previous.map((p) => p.expiresAt));
  }

  /**
   * Signs one attempt.
   *
   * @param id The delivery id (`webhook-id`).
   * @param timestamp Unix seconds of the attempt (`webhook-timestamp`).
   * @param body The raw body bytes exactly as sent.
   * @param now Epoch ms deciding which previous secrets still sign.
   */
  sign(id: string, timestamp: number, body: Uint8Array, now: number): AttemptSignatures {
    if (now >= this.#lastExpiry) {
      return {
        signature: signPayload(this.#spec, body),
        standardSignature: signStandard([this.#current], id, timestamp, body),
      };
    }
    const keys = [this.#current];
    let spec = this.#spec;
    for (const previous of this.#previous) {
      if (now < previous.expiresAt) {
        keys.push(previous.key);
        spec = previous.spec; // newest first: the last one kept is the oldest
      }
    }
    return {
      signature: signPayload(spec, body),
      standardSignature: signStandard(keys, id, timestamp, body),
    };
  }
}
