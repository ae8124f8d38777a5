/**
 * Reading an incoming payload's body: its content type, its bytes within the
 * size limit, and the object they parse into (JSON or form-encoded).
 * Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";

/** The form content type an endpoint accepts beside JSON. */
export const FORM_TYPE = "application/x-www-form-urlencoded";

const encoder = new TextEncoder();

/**
 * Whether a request's body is form-encoded (else JSON).
 *
 * @throws {GatewayError} `UNSUPPORTED_MEDIA_TYPE` for any other content type.
 */
export function isFormBody(headers: Headers): boolean {
  const type = (headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  const form = type === FORM_TYPE;
  if (!form && type !== "application/json" && !/^application\/[a-z0-9.+-]+\+json$/.test(type)) {
    throw new GatewayError(
      "UNSUPPORTED_MEDIA_TYPE",
      `Unsupported Content-Type "${type || "(none)"}": send application/json (or ` +
        `application/<type>+json) or ${FORM_TYPE}`,
    );
  }
  return form;
}

/** The refusal of a body over `limit` bytes. */
export function tooLarge(limit: number): GatewayError {
  return new GatewayError(
    "PAYLOAD_TOO_LARGE",
    `Request body is over the limit of ${limit} bytes: send a smaller payload`,
    { details: { limit_bytes: limit } },
  );
}

/** Reads a request's body, refusing it once it grows past `limit` bytes. */
export async function readLimited(request: Request, limit: number): Promise<Uint8Array> {
  // A declared length (checked against the limit by the caller) bounds what
  // the server reads: take it in one piece, without creating the body's stream.
  if (request.headers.has("content-length") && !request.headers.has("transfer-encoding")) {
    return new Uint8Array(await request.arrayBuffer());
  }
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/** Parses a JSON body that must be an object (it becomes the handler's arguments). */
export function parseObject(body: Uint8Array): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (error) {
    throw new GatewayError("INVALID_JSON", `Invalid JSON body: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new GatewayError(
      "INVALID_JSON",
      "Invalid JSON body: expected an object, because it becomes the handler's arguments",
    );
  }
  return value as Record<string, unknown>;
}

/**
 * Parses a form-encoded body into an object of its fields (a repeated field
 * becomes an array); a body whose only field is `payload` (GitHub's form
 * option) is the JSON object in it.
 */
export function parseForm(body: Uint8Array): Record<string, unknown> {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch {
    throw new GatewayError("USAGE", "Invalid form body: it is not UTF-8 text");
  }
  const fields = new Map<string, string | string[]>();
  for (const [name, value] of new URLSearchParams(text)) {
    const seen = fields.get(name);
    fields.set(name, seen === undefined ? value : [seen, value].flat());
  }
  const payload = fields.get("payload");
  if (fields.size === 1 && typeof payload === "string") {
    try {
      return parseObject(encoder.encode(payload));
    } catch (error) {
      throw new GatewayError(
        "INVALID_JSON",
        `Invalid form field payload: ${
          (error as Error).message.replace(/^Invalid JSON body: /, "")
        }`,
      );
    }
  }
  // fromEntries defines own properties: a field named __proto__ stays a field.
  return Object.fromEntries(fields);
}
