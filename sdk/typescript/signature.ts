/**
 * Verifies toolgate's webhook signatures on the receiving side:
 * `X-Service-Signature: sha256=<lowercase hex HMAC-SHA256>` over the raw
 * request body, keyed with the webhook's secret (Web Crypto, constant time).
 *
 * @module
 */

const encoder = new TextEncoder();
const PREFIX = "sha256=";

function toBytes(value: string | Uint8Array | ArrayBuffer): Uint8Array<ArrayBuffer> {
  if (typeof value === "string") return encoder.encode(value) as Uint8Array<ArrayBuffer>;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return new Uint8Array(value) as Uint8Array<ArrayBuffer>;
}

function fromHex(hex: string): Uint8Array<ArrayBuffer> | undefined {
  if (hex.length !== 64 || !/^[0-9a-fA-F]+$/.test(hex)) return undefined;
  const bytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

/**
 * Whether a delivery's `X-Service-Signature` matches its raw body. Verify
 * before parsing: pass the body bytes (or text) exactly as received, never
 * re-serialized JSON. The comparison is constant-time (Web Crypto's HMAC
 * verify).
 *
 * @param secret The webhook's signing secret (`--secret`).
 * @param rawBody The request body as received: bytes, or its exact text.
 * @param header The `X-Service-Signature` value; `null`/`undefined` never verifies.
 * @returns `true` only for a well-formed header matching the body.
 *
 * @example
 * ```ts
 * Deno.serve(async (request) => {
 *   const body = new Uint8Array(await request.arrayBuffer());
 *   const ok = await verifySignature(secret, body, request.headers.get("x-service-signature"));
 *   if (!ok) return new Response("bad signature", { status: 401 });
 *   const event = JSON.parse(new TextDecoder().decode(body));
 *   return new Response(null, { status: 204 });
 * });
 * ```
 */
export async function verifySignature(
  secret: string | Uint8Array,
  rawBody: string | Uint8Array | ArrayBuffer,
  header: string | null | undefined,
): Promise<boolean> {
  if (typeof header !== "string") return false;
  const value = header.trim();
  if (!value.startsWith(PREFIX)) return false;
  const mac = fromHex(value.slice(PREFIX.length));
  if (mac === undefined) return false;
  const key = await crypto.subtle.importKey(
    "raw",
    toBytes(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["verify"],
  );
  return await crypto.subtle.verify("HMAC", key, mac, toBytes(rawBody));
}
