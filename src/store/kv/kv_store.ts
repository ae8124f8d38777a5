/**
 * Opens the one Deno KV database of a data directory and retries the
 * "database is locked" contention error of multi-process access.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { newId } from "../../ids.ts";
import type {
  ApiKeyStore,
  ApprovalStore,
  AuditStore,
  ChangeFeed,
  ConsoleSessionStore,
  DeliveryStore,
  IncomingStore,
  KeychainStore,
  KeyCheckStore,
  LeaseStore,
  MemoryStore,
  PinStore,
  PolicyStore,
  RateLimitStore,
  Store,
  UpstreamStore,
  VirtualServerStore,
  WebhookStore,
} from "../store.ts";
import {
  addAuditLogKey,
  AUDIT_COMMIT_MAX_BYTES,
  AUDIT_COMMIT_MAX_MUTATIONS,
  AUDIT_MAX_ENTRY_BYTES,
  auditEntryCost,
  auditTileCost,
  commitAuditEntries,
  keepAuditTiles,
  pruneAuditEntries,
  putAuditCheckpoint,
  readAuditChainState,
  readAuditCheckpoint,
  readAuditHead,
  readAuditHeadAndNext,
  readAuditLogKeys,
  readAuditPruned,
  readAuditRecord,
  readAuditRecordPages,
  readAuditTiles,
} from "./audit.ts";
import {
  appendDeliveryLog,
  buildDueIndex,
  bumpDeliveriesVersion,
  claimDueDeliveries,
  collectEventIfUnreferenced,
  countDlqRecords,
  deleteDeliveryLog,
  deleteDlqRecords,
  deliveriesVersion,
  DeliveryClaims,
  deliveryOpsCost,
  DeliveryWriter,
  findDlqBody,
  getDlqRecord,
  listDeliveryLogIds,
  listDlqRecords,
  listOrphanDeliveries,
  listPendingDeliveries,
  readDeliveryLog,
  readDlqBody,
  readOutboxEvent,
  requeueDlqRecord,
  trimDeliveryLog,
} from "./deliveries.ts";
import {
  addIncomingStats,
  claimIncomingJobs,
  completeIncomingJobs,
  confirmIncomingDedupeKey,
  countPendingIncomingJobs,
  failIncomingJobs,
  getIncomingJob,
  IncomingClaims,
  listFailedIncomingJobs,
  listIncomingJobs,
  logIncomingPayloads,
  purgeFailedIncomingJobs,
  putIncomingJob,
  readIncomingJobBody,
  readIncomingPayloadLog,
  releaseIncomingDedupeKey,
  replayFailedIncomingJobs,
  reserveIncomingDedupeKey,
  STAGED_BODY_MAX_BYTES,
  stageIncomingJob,
  sweepOrphanIncomingBodies,
} from "./incoming.ts";
import {
  deleteKeychainRecord,
  getKeychainRecord,
  listKeychainRecords,
  putKeychainRecord,
  readKeyCheck,
  writeKeyCheck,
} from "./keychain.ts";
import { createKvApiKeyStore } from "./api_keys.ts";
import { createKvConsoleSessionStore } from "./console_sessions.ts";
import { MemoryRateLimitStore } from "../rate_buckets.ts";
import { createKvVirtualServerStore } from "./virtual_servers.ts";
import { createKvPinStore } from "./pins.ts";
import { createKvPolicyStore } from "./policies.ts";
import { createKvApprovalStore } from "./approvals.ts";
import { deploymentIdKey, registrationsVersionKey, schemaVersionKey } from "./keys.ts";
import { claimDeliveryLease, releaseDeliveryLease } from "./lease.ts";
import { deleteMemory, getMemory, listMemory, setMemory } from "./memory.ts";
import {
  addUpstream,
  deleteServerStatus,
  listServerStatuses,
  listUpstreams,
  putServerStatus,
  removeUpstream,
  setUpstreamEnabled,
} from "./upstreams.ts";
import {
  addIncomingWebhook,
  addOutgoingWebhook,
  getIncomingWebhook,
  getOutgoingWebhook,
  listIncomingWebhooks,
  listOutgoingWebhooks,
  readIncomingStats,
  recordWebhookOutcome,
  removeWebhook,
  sealPlaintextSecrets,
  updateOutgoingWebhook,
} from "./webhooks.ts";
import { DataKey } from "../data_key.ts";
import { keySealGuard } from "../key_check.ts";
import { ReadBatcher } from "./_reads.ts";
import { KV_CHANGE_FEED } from "./changes.ts";
import { createPrivateFile, ensureDataDir } from "../_data_dir.ts";
import { checkStoreFile, claimStoreId } from "./_store_identity.ts";

export { STORE_MARKER_FILE } from "./_store_identity.ts";

/**
 * The schema version this release writes and reads. 2: pending deliveries
 * have a due index (a file of schema 1 gets it as it opens).
 */
export const SCHEMA_VERSION = 2;

/** File name of the KV database inside the data directory. */
export const KV_FILE = "toolgate.kv";

/** Options of {@linkcode openKvStore}. */
export interface OpenKvStoreOptions {
  /**
   * Data directory; created with mode 0700 when missing, made private again
   * (0700, its files 0600) when it exists.
   */
  dataDir: string;
  /** Open an in-memory database instead of the file (unit tests). @default false */
  memory?: boolean;
  /** The key sealing secrets at rest (`TOOLGATE_SECRET_KEY`). @default `<dataDir>/keychain.key` */
  secretKey?: Uint8Array;
}

const LOCK_RETRIES = 60;

function isLockError(error: unknown): boolean {
  return error instanceof Error && /database is locked|database is busy/i.test(error.message);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Runs `operation`, retrying the KV "database is locked" error with short,
 * bounded, jittered backoff (about 2 s in all before giving up).
 */
export async function withLockRetry<T>(operation: () => Promise<T>): Promise<T> {
  for (let attempt = 0;; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (isCorruptionError(error)) throw corruptionError(error);
      if (!isLockError(error) || attempt >= LOCK_RETRIES) throw error;
      await sleep(Math.min(2 + attempt * 2, 40) * (0.5 + Math.random()));
    }
  }
}

/** The Deno KV adapter: a handle on the data directory's KV database. */
export class KvStore implements Store {
  /** Which adapter this is. */
  readonly kind = "kv";
  /** The KV file (`:memory:` for an in-memory database). */
  readonly location: string;
  /** The data directory. */
  readonly dataDir: string;
  /** The KV handle, for the modules of `src/store` only. */
  readonly kv: Deno.Kv;
  /**
   * A second handle on the same file for plain reads (the modules of
   * `src/store` only): WAL readers do not queue behind the writer's commits.
   * It sees every commit that completed before the read started, on any
   * handle, so it suits reads that need no snapshot shared with a write.
   * Writes and read-then-write (`atomic().check()`) stay on {@linkcode KvStore.kv}.
   * The same handle as `kv` for an in-memory database.
   */
  readonly reader: Deno.Kv;
  /**
   * Claims on pending deliveries, in this handle's memory (the modules of
   * `src/store` only): one process per KV file sends deliveries.
   */
  readonly claims: DeliveryClaims = new DeliveryClaims();
  /**
   * Claims on incoming jobs, in this handle's memory (the modules of
   * `src/store` only): one server per KV file runs the jobs.
   */
  readonly incomingClaims: IncomingClaims = new IncomingClaims();
  /** The key sealing secrets at rest. */
  readonly dataKey: DataKey;
  #reads: ReadBatcher;
  #closed = false;

  /**
   * @param dataDir The data directory.
   * @param kv An open KV handle.
   * @param reader A second handle on the same database for reads. @default kv
   * @param dataKey The key sealing secrets at rest. @default the data directory's (in memory for `:memory:`)
   */
  constructor(
    dataDir: string,
    kv: Deno.Kv,
    reader: Deno.Kv = kv,
    location = ":memory:",
    dataKey?: DataKey,
  ) {
    this.dataKey = dataKey ?? new DataKey({ dataDir, memory: location === ":memory:" });
    this.dataKey.guardSeals(keySealGuard(this));
    this.dataDir = dataDir;
    this.location = location;
    this.kv = kv;
    this.reader = reader;
    this.#reads = new ReadBatcher(reader, withLockRetry);
  }

  /** Webhook registrations. */
  readonly webhooks: WebhookStore = {
    addOutgoing: (input) => addOutgoingWebhook(this, input),
    listOutgoing: (options) => listOutgoingWebhooks(this, options),
    getOutgoing: (id) => getOutgoingWebhook(this, id),
    updateOutgoing: (id, patch) => updateOutgoingWebhook(this, id, patch),
    recordOutcome: (id, outcome) => recordWebhookOutcome(this, id, outcome),
    addIncoming: (input) => addIncomingWebhook(this, input),
    listIncoming: () => listIncomingWebhooks(this),
    getIncoming: (id) => getIncomingWebhook(this, id),
    remove: (id) => removeWebhook(this, id),
    incomingStats: (id) => readIncomingStats(this, id),
    addIncomingStats: (id, deltas, lastReceivedAt) =>
      addIncomingStats(this, id, deltas, lastReceivedAt),
  };

  /** The delivery outbox, DLQ and delivery logs. */
  readonly deliveries: DeliveryStore = {
    sharedClaims: false,
    claimDue: (options) => claimDueDeliveries(this, options),
    renewClaims: (owner, until) => Promise.resolve(this.claims.renew(owner, until)),
    releaseClaims: (owner, keys) => Promise.resolve(this.claims.release(owner, keys)),
    writer: (options) => new DeliveryWriter(this, options),
    opsCost: (ops) => deliveryOpsCost(ops),
    bumpVersion: () => bumpDeliveriesVersion(this),
    version: () => deliveriesVersion(this),
    listPending: () => listPendingDeliveries(this),
    listOrphans: (limit) => listOrphanDeliveries(this, limit),
    findDlqBody: (eventId) => findDlqBody(this, eventId),
    readEvent: (eventId) => readOutboxEvent(this, eventId),
    collectEventIfUnreferenced: (eventId) => collectEventIfUnreferenced(this, eventId),
    listDlq: (options) => listDlqRecords(this, options),
    countDlq: () => countDlqRecords(this),
    getDlq: (dlqId) => getDlqRecord(this, dlqId),
    readDlqBody: (record) => readDlqBody(this, record),
    requeueDlq: (record, body, timestamp, now) =>
      requeueDlqRecord(this, record, body, timestamp, now),
    deleteDlq: (records) => deleteDlqRecords(this, records),
    readLog: (webhookId, limit) => readDeliveryLog(this, webhookId, limit),
    appendLog: (webhookId, entry) => appendDeliveryLog(this, webhookId, entry),
    trimLog: (webhookId, keep) => trimDeliveryLog(this, webhookId, keep),
    listLogIds: (webhookId) => listDeliveryLogIds(this, webhookId),
    deleteLog: (webhookId) => deleteDeliveryLog(this, webhookId),
  };

  /** The audit chain. */
  readonly audit: AuditStore = {
    limits: {
      maxEntryBytes: AUDIT_MAX_ENTRY_BYTES,
      commitMaxMutations: AUDIT_COMMIT_MAX_MUTATIONS,
      commitMaxBytes: AUDIT_COMMIT_MAX_BYTES,
      // Deno KV allows 81 920 key bytes per commit.
      commitMaxKeyBytes: 70_000,
      keyBytesPerMutation: 40,
    },
    entryCost: (byteLength) => auditEntryCost(byteLength),
    readHead: () => readAuditHead(this),
    readHeadAndNext: (seq) => readAuditHeadAndNext(this, seq),
    readRecord: (seq) => readAuditRecord(this, seq),
    readChainState: (hintSeq) => readAuditChainState(this, hintSeq),
    commit: async (guard, entries, head, outbox, writes, tiles) => {
      // The claims of the deliveries riding in the commit land with it.
      const effects = outbox && this.claims.stage(outbox.ops);
      let versionstamp: string | null;
      try {
        versionstamp = await commitAuditEntries(this, guard, entries, head, outbox, writes, tiles);
      } catch (error) {
        effects?.failed();
        throw error;
      }
      if (versionstamp === null) effects?.failed();
      else effects?.committed();
      return versionstamp;
    },
    tileCost: (tiles, bytes) => auditTileCost(tiles, bytes),
    readTiles: (refs) => readAuditTiles(this, refs),
    pages: (options) => readAuditRecordPages(this, options),
    readKeys: () => readAuditLogKeys(this),
    addKey: (key, retiring) => addAuditLogKey(this, key, retiring),
    readCheckpoint: () => readAuditCheckpoint(this),
    putCheckpoint: (checkpoint) => putAuditCheckpoint(this, checkpoint),
    readPruned: () => readAuditPruned(this),
    keepTiles: (tiles) => keepAuditTiles(this, tiles),
    prune: (pruned) => pruneAuditEntries(this, pruned),
  };

  /** Incoming jobs. */
  readonly incoming: IncomingStore = {
    sharedClaims: false,
    stagedBodyMaxBytes: STAGED_BODY_MAX_BYTES,
    put: (job, body, claim) => putIncomingJob(this, job, body, claim),
    readBody: (job) => readIncomingJobBody(this, job),
    list: (options) => listIncomingJobs(this, options),
    claim: (options) => claimIncomingJobs(this, options),
    renewClaims: (owner, until) => Promise.resolve(this.incomingClaims.renew(owner, until)),
    releaseClaims: (owner, ids) => Promise.resolve(this.incomingClaims.release(owner, ids)),
    stage: (job, body, claim) => stageIncomingJob(this, job, body, claim),
    complete: (items) => completeIncomingJobs(this, items),
    sweepOrphanBodies: () => sweepOrphanIncomingBodies(this),
    pendingCounts: () => countPendingIncomingJobs(this),
    fail: (items) => failIncomingJobs(this, items),
    get: (id) => getIncomingJob(this, id),
    listFailed: (options) => listFailedIncomingJobs(this, options),
    replayFailed: (ids) => replayFailedIncomingJobs(this, ids),
    purgeFailed: (options) => purgeFailedIncomingJobs(this, options),
    logPayloads: (entries) => logIncomingPayloads(this, entries),
    readPayloadLog: (endpointId, limit) => readIncomingPayloadLog(this, endpointId, limit),
    reserveDedupeKey: (options) => reserveIncomingDedupeKey(this, options),
    confirmDedupeKey: (endpointId, deliveryId, jobId) =>
      confirmIncomingDedupeKey(this, endpointId, deliveryId, jobId),
    releaseDedupeKey: (endpointId, deliveryId, jobId) =>
      releaseIncomingDedupeKey(this, endpointId, deliveryId, jobId),
  };

  /** Memory notes. */
  readonly memory: MemoryStore = {
    set: (key, value, now) => setMemory(this, key, value, now),
    get: (key) => getMemory(this, key),
    list: (options) => listMemory(this, options),
    delete: (key) => deleteMemory(this, key),
  };

  /** Keychain fallback entries. */
  readonly keychain: KeychainStore = {
    put: (name, record) => putKeychainRecord(this, name, record),
    get: (name) => getKeychainRecord(this, name),
    list: () => listKeychainRecords(this),
    delete: (name) => deleteKeychainRecord(this, name),
  };

  /** The key check value of the key sealing the secrets. */
  readonly keyCheck: KeyCheckStore = {
    read: () => readKeyCheck(this),
    writeIfAbsent: (record) => writeKeyCheck(this, record),
  };

  /** API keys. */
  readonly apiKeys: ApiKeyStore = createKvApiKeyStore(this);
  /** Rate limit buckets in this process's memory: one server per data directory, no KV write per call. */
  readonly rateLimits: RateLimitStore = new MemoryRateLimitStore();

  /** Virtual servers (named tool subsets). */
  readonly servers: VirtualServerStore = createKvVirtualServerStore(this);

  /** Pins of upstream tools, prompts and resource templates. */
  readonly pins: PinStore = createKvPinStore(this);

  /** Policy rules added with `toolgate policies add`. */
  readonly policies: PolicyStore = createKvPolicyStore(this);

  /** Calls held for approval. */
  readonly approvals: ApprovalStore = createKvApprovalStore(this);

  /** Upstream registrations and server states. */
  readonly upstreams: UpstreamStore = {
    add: (input) => addUpstream(this, input),
    list: () => listUpstreams(this),
    remove: (name) => removeUpstream(this, name),
    setEnabled: (name, enabled) => setUpstreamEnabled(this, name, enabled),
    putServerStatus: (status, ttlMs) => putServerStatus(this, status, ttlMs),
    deleteServerStatus: (serverId) => deleteServerStatus(this, serverId),
    listServerStatuses: (maxAgeMs, now) => listServerStatuses(this, maxAgeMs, now),
  };

  /** Web console sessions (hashes of their ids), dropped by KV after they expire. */
  readonly consoleSessions: ConsoleSessionStore = createKvConsoleSessionStore(this);

  /** Change notification: none is pushed on KV (callers poll). */
  readonly changes: ChangeFeed = KV_CHANGE_FEED;

  /** Leases. */
  readonly leases: LeaseStore = {
    claimDelivery: (options) => claimDeliveryLease(this, options),
    releaseDelivery: (owner) => releaseDeliveryLease(this, owner),
  };

  /**
   * Reads one key on {@linkcode KvStore.reader}, with lock retry. Reads made
   * while others are in flight share one `getMany` (see `_reads.ts`): the
   * way for every plain single-key read of `src/store`.
   */
  get<T>(key: Deno.KvKey): Promise<Deno.KvEntryMaybe<T>> {
    return this.#reads.get<T>(key);
  }

  /** The schema version recorded in the file. */
  async schemaVersion(): Promise<number> {
    const entry = await this.retry(() => this.kv.get<number>(schemaVersionKey()));
    return typeof entry.value === "number" ? entry.value : 0;
  }

  /** Runs a KV operation with lock retry. */
  retry<T>(operation: () => Promise<T>): Promise<T> {
    return withLockRetry(operation);
  }

  /** Reads the registration change counter (polled by running servers). */
  async registrationsVersion(): Promise<bigint> {
    const entry = await this.get<Deno.KvU64>(registrationsVersionKey());
    return entry.value?.value ?? 0n;
  }

  /** This deployment's id, made (once, whoever is first) on first use. */
  async deploymentId(): Promise<string> {
    const key = deploymentIdKey();
    const found = await this.retry(() => this.kv.get<string>(key));
    if (typeof found.value === "string") return found.value;
    const made = newId("dep");
    await this.retry(() =>
      this.kv.atomic().check({ key, versionstamp: null }).set(key, made).commit()
    );
    const stored = await this.retry(() => this.kv.get<string>(key));
    return typeof stored.value === "string" ? stored.value : made;
  }

  /** Closes both handles; safe to call twice. */
  close(): Promise<void> {
    this.closeSync();
    return Promise.resolve();
  }

  /** Closes both handles at once; safe to call twice. */
  closeSync(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.kv.close();
    if (this.reader !== this.kv) this.reader.close();
  }
}

/**
 * Opens the store of a data directory, checking its schema version.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when the directory or database
 * cannot be read, or was written by a newer release. Nothing is repaired or
 * overwritten.
 */
export async function openKvStore(options: OpenKvStoreOptions): Promise<KvStore> {
  const { dataDir, memory = false, secretKey } = options;
  let kv: Deno.Kv;
  let reader: Deno.Kv | undefined;
  const path = `${dataDir}/${KV_FILE}`;
  if (memory) {
    kv = await Deno.openKv(":memory:");
  } else {
    await ensureDataDir(dataDir);
    // A file emptied or lost where a store was: refused before anything makes a new one in its place.
    await checkStoreFile(dataDir, path);
    // Created 0600 before SQLite opens it: the -wal and -shm files take its mode.
    await createPrivateFile(path);
    try {
      kv = await withLockRetry(() => Deno.openKv(path));
    } catch (error) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot open ${path}: ${(error as Error).message}; the file was left untouched`,
        { cause: error },
      );
    }
    try {
      reader = await withLockRetry(() => Deno.openKv(path));
    } catch (error) {
      kv.close();
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot open ${path}: ${(error as Error).message}; the file was left untouched`,
        { cause: error },
      );
    }
  }
  const dataKey = new DataKey({ dataDir, memory, key: secretKey });
  const store = new KvStore(dataDir, kv, reader, memory ? ":memory:" : path, dataKey);
  try {
    // Before anything is written: a replaced file is refused as it is.
    if (!memory) await claimStoreId(store, dataDir, path);
    await checkSchemaVersion(store, path);
    await sealPlaintextSecrets(store);
  } catch (error) {
    store.closeSync();
    throw error;
  }
  return store;
}

/** SQLite's words for a damaged database file. */
const CORRUPTION =
  /database disk image is malformed|file is not a database|SQLITE_CORRUPT|SQLITE_NOTADB/i;

function isCorruptionError(error: unknown): boolean {
  return error instanceof Error && !(error instanceof GatewayError) &&
    CORRUPTION.test(error.message);
}

function corruptionError(error: unknown): GatewayError {
  return new GatewayError(
    "STORE_CORRUPT",
    `Cannot read the KV store: ${(error as Error).message}; the file was left untouched ` +
      "(restore toolgate.kv from a backup of the data directory)",
    { cause: error },
  );
}

async function checkSchemaVersion(store: KvStore, path: string): Promise<void> {
  let entry: Deno.KvEntryMaybe<unknown>;
  try {
    entry = await store.retry(() => store.kv.get(schemaVersionKey()));
  } catch (error) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot read ${path}: ${(error as Error).message}; the file was left untouched`,
      { cause: error },
    );
  }
  if (entry.value === null) {
    await store.retry(() =>
      store.kv.atomic().check(entry).set(schemaVersionKey(), SCHEMA_VERSION).commit()
    );
    return;
  }
  if (entry.value === 1) {
    // Schema 2 adds the due index of pending deliveries. Building it is
    // idempotent, so a start killed midway builds it again.
    await buildDueIndex(store);
    await store.retry(() =>
      store.kv.atomic().check(entry).set(schemaVersionKey(), SCHEMA_VERSION).commit()
    );
    return;
  }
  if (typeof entry.value !== "number") {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot use ${path}: its schema version is unreadable; the file was left untouched`,
    );
  }
  if (entry.value > SCHEMA_VERSION) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot use ${path}: it was written by a newer toolgate (schema ${entry.value}, this release reads ${SCHEMA_VERSION})`,
    );
  }
}
