/**
 * HMAC-SHA256 signatures of outgoing webhook bodies (spec §5.1):
 * `sha256=<lowercase hex>` keyed with the webhook secret, over the exact bytes
 * sent.
 *
 * @module
 */

/** Prefix of a signature header value. */
export const SIGNATURE_PREFIX = "sha256=";

const encoder = new TextEncoder();
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += HEX[byte];
  return out;
}

function fromHex(hex: string): Uint8Array<ArrayBuffer> | null {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

function asBuffer(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return bytes.buffer instanceof ArrayBuffer
    ? bytes as Uint8Array<ArrayBuffer>
    : new Uint8Array(bytes) as Uint8Array<ArrayBuffer>;
}

/**
 * Imports a signing secret as an HMAC-SHA256 key (import once, sign many).
 *
 * @param secret The webhook's signing secret (its UTF-8 bytes are the key).
 */
export async function importSigningKey(secret: string): Promise<CryptoKey> {
  return await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign", "verify"],
  );
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
 * const header = await signPayload("s3cret", body); // "sha256=…"
 * ```
 */
export async function signPayload(secret: string | CryptoKey, body: Uint8Array): Promise<string> {
  const key = typeof secret === "string" ? await importSigningKey(secret) : secret;
  const mac = await crypto.subtle.sign("HMAC", key, asBuffer(body));
  return SIGNATURE_PREFIX + toHex(new Uint8Array(mac));
}

/**
 * Verifies a signature header against the raw body bytes, in constant time
 * (Web Crypto's HMAC verify; the secret is never compared with `===`).
 *
 * @param secret The signing secret, or a key from {@linkcode importSigningKey}.
 * @param body The raw body bytes as received, before any parsing.
 * @param header The `X-Service-Signature` value (`sha256=<hex>`).
 * @returns Whether the signature is well-formed and matches.
 */
export async function verifySignature(
  secret: string | CryptoKey,
  body: Uint8Array,
  header: string | null | undefined,
): Promise<boolean> {
  if (typeof header !== "string") return false;
  const value = header.trim();
  if (!value.startsWith(SIGNATURE_PREFIX)) return false;
  const mac = fromHex(value.slice(SIGNATURE_PREFIX.length));
  if (mac === null || mac.byteLength !== 32) return false;
  const key = typeof secret === "string" ? await importSigningKey(secret) : secret;
  return await crypto.subtle.verify("HMAC", key, mac, asBuffer(body));
}
