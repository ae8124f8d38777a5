/**
 * One secret key per deployment, checked: the store records the key check
 * value of the key its secrets are sealed with (an HMAC of a fixed label,
 * never the key), and a process whose key is another refuses to seal
 * anything, so that a CLI or instance started without the shared
 * `TOOLGATE_SECRET_KEY` cannot leave secrets no one else can read.
 *
 * The value is recorded when a secret is first sealed, when a server starts,
 * or, for a store written before check values existed, by the first process
 * that can decrypt its secrets.
 *
 * @module
 */
import { timingSafeEqual } from "node:crypto";
import { Buffer } from "node:buffer";
import { GatewayError } from "../errors/mod.ts";
import { type DataKey, KEYCHAIN_AAD_PREFIX, type KeyCheckValue } from "./data_key.ts";
import type { Store } from "./store.ts";

/**
 * How this process's key stands against the store's record:
 * - `match`: the recorded key is this process's key;
 * - `mismatch`: the store's secrets are sealed with another key;
 * - `no_key`: the store records a key and this process has none (no key file, no `TOOLGATE_SECRET_KEY`);
 * - `unrecorded`: nothing recorded yet, and the secrets stored open with this key;
 * - `unset`: nothing recorded and nothing sealed yet.
 */
export type KeyState = "match" | "mismatch" | "no_key" | "unrecorded" | "unset";

/** This process's key beside the store's record. */
export interface KeyStatus {
  /** How they stand. */
  state: KeyState;
  /** The fingerprint of this process's key, `null` when it has none. */
  key_fingerprint: string | null;
  /** The fingerprint the store records, `null` when none is recorded. */
  store_fingerprint: string | null;
  /** Where this process's key comes from: `TOOLGATE_SECRET_KEY` or the key file's path. */
  key_source: string;
}

/** Options of {@linkcode ensureKey}. */
export interface EnsureKeyOptions {
  /**
   * Record this process's key when nothing is recorded nor sealed (making
   * the key file if it is missing): what sealing and a starting server do.
   * @default true
   */
  claim?: boolean;
}

/**
 * This process's key beside the store's record, without writing anything.
 *
 * @throws {GatewayError} `STORE_UNAVAILABLE` or `STORE_CORRUPT` when the store cannot be read.
 */
export async function readKeyStatus(store: Store): Promise<KeyStatus> {
  const key = store.dataKey;
  const [record, mine] = await Promise.all([store.keyCheck.read(), ownCheck(key)]);
  const status = (state: KeyState): KeyStatus => ({
    state,
    key_fingerprint: mine?.fingerprint ?? null,
    store_fingerprint: record?.fingerprint ?? null,
    key_source: key.describe(),
  });
  if (record) {
    if (!mine) return status("no_key");
    return status(sameCheck(mine.check, record.check) ? "match" : "mismatch");
  }
  const sealed = await openOneSealed(store);
  if (sealed === "none") return status("unset");
  return status(sealed === "opened" ? "unrecorded" : mine ? "mismatch" : "no_key");
}

/**
 * Makes sure this process's key is the store's: records it when the store
 * has none recorded and its secrets (if any) open with it.
 *
 * @returns The status after recording (`match`, or `unset` when nothing was claimed).
 * @throws {GatewayError} `KEY_MISMATCH` naming both fingerprints and the fix when the key is another or missing.
 */
export async function ensureKey(store: Store, options: EnsureKeyOptions = {}): Promise<KeyStatus> {
  const { claim = true } = options;
  const status = await readKeyStatus(store);
  if (status.state === "match") return status;
  if (status.state === "mismatch" || status.state === "no_key") throw mismatchError(store, status);
  if (status.state === "unset" && !claim) return status;
  const mine = await store.dataKey.checkValue(true);
  const recorded = await store.keyCheck.writeIfAbsent({
    check: mine.check,
    fingerprint: mine.fingerprint,
    created_at: new Date().toISOString(),
  });
  const after: KeyStatus = {
    ...status,
    key_fingerprint: mine.fingerprint,
    store_fingerprint: recorded.fingerprint,
  };
  // Another process recorded its key first.
  if (!sameCheck(mine.check, recorded.check)) {
    throw mismatchError(store, { ...after, state: "mismatch" });
  }
  return { ...after, state: "match" };
}

/**
 * A seal guard for `store.dataKey` ({@linkcode DataKey.guardSeals}): the
 * first seal checks (and records) the key; once it matched, later seals
 * cost nothing. A failed check is tried again at the next seal.
 */
export function keySealGuard(store: Store): () => Promise<void> {
  let checked: Promise<void> | undefined;
  return () => {
    checked ??= ensureKey(store).then(() => {}, (error) => {
      checked = undefined;
      throw error;
    });
    return checked;
  };
}

/** The error of a key that is not the store's, with both fingerprints and the fix. */
export function mismatchError(store: Store, status: KeyStatus): GatewayError {
  const theirs = status.store_fingerprint
    ? `the key of fingerprint ${status.store_fingerprint}`
    : "another key (sealed before key check values were recorded)";
  const fix = store.kind === "postgres"
    ? `set TOOLGATE_SECRET_KEY to that key (\`base64 -w0 <data_dir>/keychain.key\` in the ` +
      `data directory of the instance that sealed them) for every instance and CLI sharing ` +
      `${store.location}; nothing was sealed`
    : `restore that key file from a backup of the data directory, or set TOOLGATE_SECRET_KEY ` +
      `to its base64; nothing was sealed`;
  const message = status.state === "no_key"
    ? `This process has no secret key (${status.key_source} is missing) and the store's ` +
      `secrets are sealed with ${theirs}: ${fix}`
    : `This process's secret key (fingerprint ${status.key_fingerprint}, from ` +
      `${status.key_source}) is not the one the store's secrets are sealed with (${theirs}): ` +
      fix;
  return new GatewayError("KEY_MISMATCH", message, {
    details: {
      key_fingerprint: status.key_fingerprint,
      store_fingerprint: status.store_fingerprint,
      key_source: status.key_source,
    },
  });
}

async function ownCheck(key: DataKey): Promise<KeyCheckValue | null> {
  return await key.exists() ? await key.checkValue(false) : null;
}

function sameCheck(a: string, b: string): boolean {
  const left = Buffer.from(a, "base64");
  const right = Buffer.from(b, "base64");
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * Tries the stored secrets until one is sealed: `opened` when it opens with
 * this process's key, `failed` when it does not, `none` when nothing sealed
 * is stored.
 */
async function openOneSealed(store: Store): Promise<"opened" | "failed" | "none"> {
  const outgoing = await store.webhooks.listOutgoing({ unreadableSecrets: "report" });
  if (outgoing.some((webhook) => webhook.secret_error)) return "failed";
  // Plain-text secrets of an older release are sealed when the store opens.
  if (outgoing.some((webhook) => webhook.secret !== undefined)) return "opened";
  try {
    const incoming = await store.webhooks.listIncoming();
    if (incoming.some((endpoint) => endpoint.secret !== undefined)) return "opened";
  } catch (error) {
    if (error instanceof GatewayError && error.message.startsWith("Cannot decrypt")) {
      return "failed";
    }
    throw error;
  }
  for (const { name, record } of await store.keychain.list()) {
    if (record.backend !== "file") continue;
    try {
      await store.dataKey.decrypt(KEYCHAIN_AAD_PREFIX + name, record);
      return "opened";
    } catch (error) {
      if (error instanceof GatewayError) return "failed";
      throw error;
    }
  }
  return "none";
}
