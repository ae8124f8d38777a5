/**
 * A toolgate webhook receiver that verifies `X-Service-Signature` over the
 * raw body bytes with a constant-time comparison (Web Crypto's HMAC verify).
 *
 * Run: `WEBHOOK_SECRET=… deno run --allow-net --allow-env examples/receiver.ts [port]`
 * then `toolgate webhooks add --url http://127.0.0.1:<port>/ --secret …`.
 *
 * @module
 */

const encoder = new TextEncoder();

/**
 * Checks a `sha256=<hex>` header against the raw body.
 *
 * @returns Whether the signature is well-formed and matches.
 */
export async function verify(secret: string, rawBody: Uint8Array, header: string | null) {
  const match = /^sha256=([0-9a-f]{64})$/.exec(header ?? "");
  if (!match) return false;
  const mac = new Uint8Array(match[1].match(/../g)!.map((byte) => parseInt(byte, 16)));
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["verify"],
  );
  // crypto.subtle.verify compares in constant time; never compare with ===.
  return await crypto.subtle.verify("HMAC", key, mac, rawBody);
}

if (import.meta.main) {
  const secret = Deno.env.get("WEBHOOK_SECRET");
  if (!secret) throw new Error("Set WEBHOOK_SECRET to the webhook's --secret");
  const port = Number(Deno.args[0] ?? 8787);
  Deno.serve({ hostname: "127.0.0.1", port }, async (request) => {
    const raw = new Uint8Array(await request.arrayBuffer()); // verify these bytes, before parsing
    if (!(await verify(secret, raw, request.headers.get("X-Service-Signature")))) {
      return new Response("bad signature", { status: 401 });
    }
    const event = JSON.parse(new TextDecoder().decode(raw));
    console.log(`verified ${event.type} ${request.headers.get("X-Service-Delivery")}`);
    return new Response(null, { status: 204 });
  });
}
