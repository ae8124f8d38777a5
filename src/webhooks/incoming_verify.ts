/**
 * Verification of incoming webhook requests, the way each sender signs them:
 * one function, {@linkcode verifyIncoming}, over a table of schemes
 * ({@linkcode VERIFY_SCHEMES}).
 *
 * Every scheme checks an HMAC-SHA256 over the raw body bytes as received,
 * before anything is parsed, and compares digests in constant time
 * (`timingSafeEqual`). Schemes that sign a timestamp (Stripe, Slack,
 * Standard Webhooks) refuse one further than the tolerance from the
 * injected clock, in the past or the future.
 *
 * | scheme              | headers                                                 | signed content             |
 * | ------------------- | ------------------------------------------------------- | -------------------------- |
 * | `hmac-sha256`       | `X-Service-Signature: sha256=<hex>` (or its own header) | body                       |
 * | `github`            | `X-Hub-Signature-256: sha256=<hex>`                     | body                       |
 * | `stripe`            | `Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>…]`          | `<ts>.<body>`              |
 * | `slack`             | `X-Slack-Signature: v0=<hex>`, `X-Slack-Request-Timestamp` | `v0:<ts>:<body>`        |
 * | `shopify`           | `X-Shopify-Hmac-Sha256: <base64>`                       | body                       |
 * | `standard-webhooks` | `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64> …` | `<id>.<ts>.<body>` |
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { GatewayError } from "../errors/mod.ts";
import { type IncomingWebhook, VerifySchemeSchema } from "../store/mod.ts";
import { standardKeyBytes } from "./signer.ts";

/** A signature scheme of an incoming endpoint (the record's `verify`). */
export type VerifyScheme = NonNullable<IncomingWebhook["verify"]>;

/** The signature schemes an incoming endpoint can verify (`webhooks create --verify`). */
export const VERIFY_SCHEMES: readonly VerifyScheme[] = VerifySchemeSchema.options;

/** Default timestamp tolerance of the schemes that sign one: 5 minutes. */
export const DEFAULT_TOLERANCE_S = 300;

/** Header of the `hmac-sha256` scheme unless the endpoint names another. */
export const DEFAULT_SIGNATURE_HEADER = "X-Service-Signature";

/** Options of {@linkcode verifyIncoming}. */
export interface VerifyIncomingOptions {
  /** The scheme. */
  scheme: VerifyScheme;
  /** The endpoint's secret (as the sender shows it, e.g. `whsec_…` for Stripe). */
  secret: string;
  /** `hmac-sha256` only: the header carrying `sha256=<hex>`. @default "X-Service-Signature" */
  signatureHeader?: string;
  /** Most seconds a signed timestamp may be from `now`, either way. @default 300 */
  toleranceS?: number;
  /** The current time, epoch ms. */
  now: number;
}

/** What a successful verification established. */
export interface VerifiedRequest {
  /** The scheme that verified the request. */
  scheme: VerifyScheme;
  /** The signed timestamp (unix seconds), for schemes that sign one. */
  timestamp?: number;
  /** The signed message id (`webhook-id` of Standard Webhooks), usable for de-duplication. */
  id?: string;
}

/** What a scheme's check sees. */
interface SchemeInput {
  headers: Headers;
  body: Uint8Array;
  secret: string;
  signatureHeader: string;
}

/** A scheme's outcome before the timestamp check. */
type SchemeResult =
  | { ok: true; timestamp?: number; id?: string; timestampHeader?: string }
  | { ok: false; message: string };

interface Scheme {
  /** The headers a sender must send, for messages and docs. */
  expects(signatureHeader: string): string;
  check(input: SchemeInput): SchemeResult;
}

/** HMAC-SHA256 of the parts, in order. */
function hmac(key: string | Uint8Array, ...parts: (string | Uint8Array)[]): Buffer {
  const mac = createHmac("sha256", key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** Whether `candidate` (already decoded) equals `expected`, in constant time. */
function digestEquals(expected: Buffer, candidate: Buffer): boolean {
  return candidate.length === expected.length && timingSafeEqual(expected, candidate);
}

const HEX_64 = /^[0-9a-fA-F]{64}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function fromHex(hex: string): Buffer | undefined {
  return HEX_64.test(hex) ? Buffer.from(hex, "hex") : undefined;
}

function fromBase64(text: string): Buffer | undefined {
  return BASE64.test(text) ? Buffer.from(text, "base64") : undefined;
}

/** Parses a unix-seconds timestamp header: digits only. */
function parseTimestamp(raw: string | null | undefined): number | undefined {
  if (!raw || !/^\d{1,12}$/.test(raw.trim())) return undefined;
  return Number(raw.trim());
}

function missing(header: string, format: string): SchemeResult {
  return { ok: false, message: `Missing ${header}: this endpoint requires ${format}` };
}

function mismatch(header: string): SchemeResult {
  return {
    ok: false,
    message: `Invalid ${header}: the signature does not match the body and the endpoint's secret`,
  };
}

function malformed(header: string, format: string): SchemeResult {
  return { ok: false, message: `Invalid ${header}: expected ${format}` };
}

/** `sha256=<hex>` HMAC of the body in `header` (today's scheme, and GitHub's). */
function bodyHexScheme(fixedHeader?: string): Scheme {
  return {
    expects: (signatureHeader) => `${fixedHeader ?? signatureHeader}: sha256=<hex>`,
    check({ headers, body, secret, signatureHeader }) {
      const header = fixedHeader ?? signatureHeader;
      const format = "sha256=<hex> (HMAC-SHA256 of the body)";
      const value = headers.get(header)?.trim();
      if (!value) return missing(header, format);
      const digest = value.startsWith("sha256=") ? fromHex(value.slice(7)) : undefined;
      if (!digest) return malformed(header, format);
      return digestEquals(hmac(secret, body), digest) ? { ok: true } : mismatch(header);
    },
  };
}

const SCHEMES: Record<VerifyScheme, Scheme> = {
  "hmac-sha256": bodyHexScheme(),
  github: bodyHexScheme("X-Hub-Signature-256"),
  stripe: {
    expects: () => "Stripe-Signature: t=<timestamp>,v1=<hex>",
    check({ headers, body, secret }) {
      const header = "Stripe-Signature";
      const format = "t=<timestamp>,v1=<hex> (HMAC-SHA256 of <t>.<body>)";
      const value = headers.get(header);
      if (!value) return missing(header, format);
      let timestamp: number | undefined;
      const signatures: Buffer[] = [];
      for (const item of value.split(",")) {
        const at = item.indexOf("=");
        const [name, content] = [item.slice(0, at).trim(), item.slice(at + 1).trim()];
        if (name === "t") timestamp = parseTimestamp(content);
        else if (name === "v1") {
          const digest = fromHex(content);
          if (digest) signatures.push(digest);
        }
      }
      if (timestamp === undefined || signatures.length === 0) return malformed(header, format);
      const expected = hmac(secret, `${timestamp}.`, body);
      // Every candidate is compared, so the time does not tell which one matched.
      let ok = false;
      for (const signature of signatures) ok = digestEquals(expected, signature) || ok;
      return ok ? { ok: true, timestamp, timestampHeader: `${header} t=` } : mismatch(header);
    },
  },
  slack: {
    expects: () => "X-Slack-Signature: v0=<hex> and X-Slack-Request-Timestamp",
    check({ headers, body, secret }) {
      const header = "X-Slack-Signature";
      const format = "v0=<hex> (HMAC-SHA256 of v0:<X-Slack-Request-Timestamp>:<body>)";
      const value = headers.get(header)?.trim();
      if (!value) return missing(header, format);
      const rawTimestamp = headers.get("X-Slack-Request-Timestamp");
      if (!rawTimestamp) {
        return missing("X-Slack-Request-Timestamp", "the unix time Slack signed");
      }
      const timestamp = parseTimestamp(rawTimestamp);
      if (timestamp === undefined) {
        return malformed("X-Slack-Request-Timestamp", "unix seconds");
      }
      const digest = value.startsWith("v0=") ? fromHex(value.slice(3)) : undefined;
      if (!digest) return malformed(header, format);
      return digestEquals(hmac(secret, `v0:${timestamp}:`, body), digest)
        ? { ok: true, timestamp, timestampHeader: "X-Slack-Request-Timestamp" }
        : mismatch(header);
    },
  },
  shopify: {
    expects: () => "X-Shopify-Hmac-Sha256: <base64>",
    check({ headers, body, secret }) {
      const header = "X-Shopify-Hmac-Sha256";
      const format = "<base64> (HMAC-SHA256 of the body)";
      const value = headers.get(header)?.trim();
      if (!value) return missing(header, format);
      const digest = fromBase64(value);
      if (!digest) return malformed(header, format);
      return digestEquals(hmac(secret, body), digest) ? { ok: true } : mismatch(header);
    },
  },
  "standard-webhooks": {
    expects: () => "webhook-id, webhook-timestamp and webhook-signature: v1,<base64>",
    check({ headers, body, secret }) {
      const header = "webhook-signature";
      const format = "v1,<base64> (HMAC-SHA256 of <webhook-id>.<webhook-timestamp>.<body>)";
      const id = headers.get("webhook-id");
      const rawTimestamp = headers.get("webhook-timestamp");
      const value = headers.get(header);
      if (!id) return missing("webhook-id", "the message id the sender signed");
      if (!rawTimestamp) return missing("webhook-timestamp", "the unix time the sender signed");
      if (!value) return missing(header, format);
      const timestamp = parseTimestamp(rawTimestamp);
      if (timestamp === undefined) return malformed("webhook-timestamp", "unix seconds");
      const key = standardKeyBytes(secret);
      if (!key) return mismatch(header);
      const expected = hmac(key, `${id}.${timestamp}.`, body);
      let ok = false;
      let any = false;
      for (const item of value.trim().split(/\s+/)) {
        const comma = item.indexOf(",");
        if (item.slice(0, comma) !== "v1") continue;
        const digest = fromBase64(item.slice(comma + 1));
        if (!digest) continue;
        any = true;
        ok = digestEquals(expected, digest) || ok;
      }
      if (!any) return malformed(header, format);
      return ok
        ? { ok: true, timestamp, id, timestampHeader: "webhook-timestamp" }
        : mismatch(header);
    },
  },
};

/**
 * The headers a sender must send under a scheme, e.g.
 * `"X-Hub-Signature-256: sha256=<hex>"` for `github`.
 *
 * @param scheme The scheme.
 * @param signatureHeader `hmac-sha256` only: the endpoint's header.
 */
export function expectedHeaders(scheme: VerifyScheme, signatureHeader?: string): string {
  return SCHEMES[scheme].expects(signatureHeader ?? DEFAULT_SIGNATURE_HEADER);
}

/** Whether `value` names a scheme of {@linkcode VERIFY_SCHEMES}. */
export function isVerifyScheme(value: string): value is VerifyScheme {
  return (VERIFY_SCHEMES as readonly string[]).includes(value);
}

/**
 * Verifies one request's signature over its raw body bytes.
 *
 * @param headers The request headers.
 * @param body The raw body bytes as received, before any parsing.
 * @param options Scheme, secret, tolerance and the current time.
 * @returns What the signature established (the signed timestamp, Standard Webhooks' id).
 * @throws {GatewayError} `SIGNATURE_INVALID` when a header is missing, malformed or does
 *   not match (the message names the header expected); `SIGNATURE_EXPIRED` when the
 *   signature matches but its timestamp is further than the tolerance from now.
 *
 * @example
 * ```ts
 * const verified = verifyIncoming(request.headers, body, {
 *   scheme: "stripe",
 *   secret: "whsec_…",
 *   now: Date.now(),
 * });
 * ```
 */
export function verifyIncoming(
  headers: Headers,
  body: Uint8Array,
  options: VerifyIncomingOptions,
): VerifiedRequest {
  const {
    scheme,
    secret,
    signatureHeader = DEFAULT_SIGNATURE_HEADER,
    toleranceS = DEFAULT_TOLERANCE_S,
    now,
  } = options;
  const result = SCHEMES[scheme].check({ headers, body, secret, signatureHeader });
  if (!result.ok) throw new GatewayError("SIGNATURE_INVALID", result.message);
  if (result.timestamp !== undefined) {
    const skew = Math.round(now / 1000 - result.timestamp);
    if (Math.abs(skew) > toleranceS) {
      const when = skew > 0 ? `${skew} s old` : `${-skew} s in the future`;
      throw new GatewayError(
        "SIGNATURE_EXPIRED",
        `Expired signature: ${result.timestampHeader} ${result.timestamp} is ${when}, past the ` +
          `tolerance of ${toleranceS} s; the sender must sign each request when it sends it ` +
          `(and both clocks must be right)`,
        { details: { timestamp: result.timestamp, tolerance_s: toleranceS } },
      );
    }
  }
  return {
    scheme,
    ...(result.timestamp !== undefined ? { timestamp: result.timestamp } : {}),
    ...(result.id !== undefined ? { id: result.id } : {}),
  };
}

/**
 * Whether an `Authorization` header carries `Bearer <token>`, compared in
 * constant time (both sides hashed first, so neither length nor the first
 * difference shows).
 *
 * @param header The `Authorization` header, if any.
 * @param token The expected token.
 */
export function bearerMatches(header: string | null, token: string): boolean {
  const match = header === null ? null : /^Bearer +([^\s]+) *$/i.exec(header);
  if (!match) return false;
  const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();
  return timingSafeEqual(digest(match[1]), digest(token));
}
