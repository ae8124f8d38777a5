/**
 * Webhook secrets at rest: an adapter stores an outgoing webhook's `secret`
 * and `previous_secrets[].secret`, and an incoming endpoint's `secret`, as
 * `{"sealed": "<base64 of nonce and AES-256-GCM ciphertext>"}`, bound to the
 * record's id, and hands the core plain text. A secret stored as plain text
 * (before this release) still reads; {@linkcode sealPlaintextSecrets} seals
 * those when a store opens. Private to `src/store`.
 *
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../errors/mod.ts";
import type { DataKey } from "./data_key.ts";
import { parseRecord } from "./_records.ts";
import {
  type IncomingWebhook,
  IncomingWebhookSchema,
  type ListedOutgoingWebhook,
  type OutgoingWebhook,
  OutgoingWebhookSchema,
} from "./records.ts";

const AAD_PREFIX = "toolgate-webhook-secret-v1:";

/** A secret as stored: sealed, or plain text written by an earlier release. */
const StoredSecretSchema = z.union([
  z.string().min(1),
  z.strictObject({ sealed: z.string().min(1) }),
]);

type StoredSecret = z.infer<typeof StoredSecretSchema>;

/** An outgoing webhook as stored. */
export const StoredOutgoingWebhookSchema = OutgoingWebhookSchema.extend({
  secret: StoredSecretSchema.optional(),
  previous_secrets: z.array(z.strictObject({ secret: StoredSecretSchema, expires_at: z.string() }))
    .optional(),
});

/** An outgoing webhook as stored. */
export type StoredOutgoingWebhook = z.infer<typeof StoredOutgoingWebhookSchema>;

/** An incoming endpoint as stored. */
export const StoredIncomingWebhookSchema = IncomingWebhookSchema.extend({
  secret: StoredSecretSchema.optional(),
});

/** An incoming endpoint as stored. */
export type StoredIncomingWebhook = z.infer<typeof StoredIncomingWebhookSchema>;

async function seal(key: DataKey, id: string, secret: string): Promise<StoredSecret> {
  return { sealed: await key.seal(AAD_PREFIX + id, secret) };
}

async function open(key: DataKey, id: string, secret: StoredSecret): Promise<string> {
  if (typeof secret === "string") return secret;
  try {
    await key.cryptoKey(false);
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    // A missing or unreadable key file: as the key says, plus what several instances need.
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot decrypt the signing secret of ${id}: ${error.message}; instances sharing a ` +
        `database need the same TOOLGATE_SECRET_KEY`,
      { cause: error },
    );
  }
  try {
    return await key.open(AAD_PREFIX + id, secret.sealed);
  } catch (error) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot decrypt the signing secret of ${id}: ${key.describe()} is not the key it was ` +
        `sealed with; every instance sharing a database needs the same TOOLGATE_SECRET_KEY ` +
        `(the base64 of the first instance's keychain.key)`,
      { cause: error },
    );
  }
}

/** An outgoing webhook as stored: its secrets sealed. */
export async function sealOutgoing(
  key: DataKey,
  webhook: OutgoingWebhook,
): Promise<StoredOutgoingWebhook> {
  const { secret, previous_secrets, ...rest } = webhook;
  return {
    ...rest,
    ...(secret !== undefined ? { secret: await seal(key, webhook.id, secret) } : {}),
    ...(previous_secrets
      ? {
        previous_secrets: await Promise.all(
          previous_secrets.map(async (p) => ({
            secret: await seal(key, webhook.id, p.secret),
            expires_at: p.expires_at,
          })),
        ),
      }
      : {}),
  };
}

/**
 * Reads a stored outgoing webhook: validated, its secrets opened.
 *
 * @param what Names the record in errors.
 * @throws {GatewayError} `STORE_CORRUPT` when it does not parse or a secret does not open.
 */
export async function openOutgoing(
  key: DataKey,
  value: unknown,
  what: string,
): Promise<OutgoingWebhook> {
  const stored = parseRecord(StoredOutgoingWebhookSchema, value, what);
  const { secret, previous_secrets, ...rest } = stored;
  return {
    ...rest,
    ...(secret !== undefined ? { secret: await open(key, stored.id, secret) } : {}),
    ...(previous_secrets
      ? {
        previous_secrets: await Promise.all(
          previous_secrets.map(async (p) => ({
            secret: await open(key, stored.id, p.secret),
            expires_at: p.expires_at,
          })),
        ),
      }
      : {}),
  };
}

/**
 * As {@linkcode openOutgoing}, but a secret that cannot be decrypted gives
 * the webhook without its secrets and a `secret_error` (a record that does
 * not parse still throws).
 */
export async function openOutgoingReporting(
  key: DataKey,
  value: unknown,
  what: string,
): Promise<ListedOutgoingWebhook> {
  try {
    return await openOutgoing(key, value, what);
  } catch (error) {
    if (!(error instanceof GatewayError) || !error.message.startsWith("Cannot decrypt")) {
      throw error;
    }
    const { secret: _secret, previous_secrets: _previous, ...rest } = parseRecord(
      StoredOutgoingWebhookSchema,
      value,
      what,
    );
    return { ...rest, secret_error: error.message };
  }
}

/** An incoming endpoint as stored: its secret sealed. */
export async function sealIncoming(
  key: DataKey,
  endpoint: IncomingWebhook,
): Promise<StoredIncomingWebhook> {
  const { secret, ...rest } = endpoint;
  return {
    ...rest,
    ...(secret !== undefined ? { secret: await seal(key, endpoint.id, secret) } : {}),
  };
}

/**
 * Reads a stored incoming endpoint: validated, its secret opened.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when it does not parse or the secret does not open.
 */
export async function openIncoming(
  key: DataKey,
  value: unknown,
  what: string,
): Promise<IncomingWebhook> {
  const stored = parseRecord(StoredIncomingWebhookSchema, value, what);
  const { secret, ...rest } = stored;
  return {
    ...rest,
    ...(secret !== undefined ? { secret: await open(key, stored.id, secret) } : {}),
  };
}

/** Whether a stored registration (either kind) still holds a secret in plain text. */
export function hasPlaintextSecret(value: unknown): boolean {
  if (!value || typeof value !== "object") return false;
  const record = value as { secret?: unknown; previous_secrets?: unknown };
  if (typeof record.secret === "string") return true;
  return Array.isArray(record.previous_secrets) &&
    record.previous_secrets.some((p) => typeof (p as { secret?: unknown })?.secret === "string");
}

/** A stored registration with its plain-text secrets sealed (the rest as it was). */
export async function sealStored(key: DataKey, value: unknown): Promise<unknown> {
  const record = value as { id: string };
  return record.id.startsWith("in_")
    ? await sealIncoming(key, await openIncoming(key, value, `endpoint ${record.id}`))
    : await sealOutgoing(key, await openOutgoing(key, value, `webhook ${record.id}`));
}
