/**
 * The storage interface: everything toolgate keeps goes through a
 * {@linkcode Store}, whichever adapter holds it (Deno KV, embedded, by
 * default; PostgreSQL for several instances). Nothing above this interface
 * knows which adapter it has.
 *
 * Version stamps (`versionstamp`, `headVersionstamp`, …) are opaque strings
 * an adapter hands out with a record and checks when a write is guarded by
 * them: equal stamps mean the record is unchanged.
 *
 * @module
 */
import type {
  ApiKeyRecord,
  ApprovalRecord,
  AuditChainState,
  AuditCheckpoint,
  AuditCommitGuard,
  AuditCommitOutbox,
  AuditEntryWrite,
  AuditHead,
  AuditLogKey,
  AuditPruned,
  AuditRecord,
  AuditTileRef,
  AuditTileWrite,
  ClaimDueOptions,
  ClaimIncomingOptions,
  ClaimLeaseOptions,
  DedupeReservation,
  DeliveryLogEntry,
  DeliveryOp,
  DeliveryOutcome,
  DlqRecord,
  IncomingClaim,
  IncomingFailure,
  IncomingJob,
  IncomingLogEntry,
  IncomingStats,
  IncomingWebhook,
  KeychainRecord,
  KeyCheckRecord,
  ListDlqPageOptions,
  ListedOutgoingWebhook,
  ListMemoryOptions,
  ListMemoryResult,
  ListOutgoingOptions,
  MemoryEntry,
  NewIncomingWebhook,
  NewOutgoingWebhook,
  NewUpstream,
  OutboxEvent,
  OutgoingWebhook,
  OutgoingWebhookPatch,
  PinKind,
  PolicyRecord,
  ReadAuditRecordPagesOptions,
  ReserveDedupeOptions,
  ServerStatus,
  SetMemoryResult,
  StoredDelivery,
  ToolPinRecord,
  UpstreamRecord,
  VirtualServerRecord,
  VirtualServerUpdate,
  WriteResult,
} from "./records.ts";
import type { DataKey } from "./data_key.ts";
import type { RateRule, RateTake } from "./rate_buckets.ts";

/** What a set of writes adds to one commit, for adapters that bound commits. */
export interface StoreCost {
  /** Records written or deleted. */
  mutations: number;
  /** Bytes of keys. */
  keyBytes: number;
  /** Bytes in all, keys included. */
  bytes: number;
}

/**
 * Writes one store module hands to another's commit, so that both become
 * durable together (an incoming job rides in the commit of its audit
 * entry). Built by {@linkcode IncomingStore.stage}; opaque outside the
 * adapter that built it.
 */
export interface StagedWrites {
  /** What the writes add to a commit. */
  readonly cost: StoreCost;
}

/** Outgoing and incoming webhook registrations. */
export interface WebhookStore {
  /** Stores a new outgoing webhook and returns it. */
  addOutgoing(input: NewOutgoingWebhook): Promise<OutgoingWebhook>;
  /** Every outgoing webhook, oldest first. */
  listOutgoing(options?: ListOutgoingOptions): Promise<ListedOutgoingWebhook[]>;
  /** One outgoing webhook, or `null`. */
  getOutgoing(id: string): Promise<OutgoingWebhook | null>;
  /**
   * Changes an outgoing webhook (and bumps the registration counter, so
   * running servers see it). Enabling it (`disabled: null`) also resets its
   * dead-letter streak ({@linkcode WebhookStore.recordOutcome}).
   *
   * @returns The webhook as stored now, or `null` when there is none.
   */
  updateOutgoing(id: string, patch: OutgoingWebhookPatch): Promise<OutgoingWebhook | null>;
  /**
   * Records the final outcome of one event at an outgoing webhook, atomically
   * across instances.
   *
   * @returns How many events in a row have now been dead-lettered there (0 after a delivery).
   */
  recordOutcome(id: string, outcome: DeliveryOutcome): Promise<number>;
  /**
   * Stores a new incoming endpoint; name and path are unique.
   *
   * @throws {GatewayError} `CONFLICT` when the name or path is taken.
   */
  addIncoming(input: NewIncomingWebhook): Promise<IncomingWebhook>;
  /** Every incoming endpoint, oldest first. */
  listIncoming(): Promise<IncomingWebhook[]>;
  /** One incoming endpoint, or `null`. */
  getIncoming(id: string): Promise<IncomingWebhook | null>;
  /** Removes a webhook of either kind, and says which kind it was (`null`: none). */
  remove(id: string): Promise<"outgoing" | "incoming" | null>;
  /** The counters of an incoming endpoint. */
  incomingStats(id: string): Promise<IncomingStats>;
  /** Adds to the counters of an incoming endpoint. */
  addIncomingStats(
    id: string,
    deltas: { received?: number; rejected?: number; failed?: number },
    lastReceivedAt?: string,
  ): Promise<void>;
}

/** Group-commits delivery writes: see {@linkcode DeliveryStore.writer}. */
export interface DeliveryWriter {
  /** Units waiting to be committed. */
  readonly queued: number;
  /**
   * Queues `ops` for the next group commit, as one atomic unit.
   *
   * @returns Once committed: the version stamps and whether collections applied.
   */
  write(ops: readonly DeliveryOp[]): Promise<WriteResult>;
  /** Resolves once every queued write is committed (or failed). */
  flush(): Promise<void>;
}

/** The delivery outbox, the dead-letter queue and the delivery logs. */
export interface DeliveryStore {
  /**
   * Whether several processes may send at once, each claiming what it sends
   * (PostgreSQL). When false (Deno KV), one process per store sends: the
   * holder of the delivery lease, and its claims live only in its memory.
   */
  readonly sharedClaims: boolean;
  /**
   * Claims pending deliveries due before `dueBefore`, earliest first: those
   * nobody holds (or whose claim lapsed), leaving excluded webhooks alone.
   * Each one returned is `owner`'s alone until `until`, until it is deleted,
   * or until released; a delivery record written meanwhile keeps the claim.
   *
   * An event's fan-out entries are claimed whole: when one is returned, every
   * unclaimed entry of that fan-out record is too (even past `limit`), so the
   * claimer knows the whole list it rewrites with `put_fanout`.
   */
  claimDue(options: ClaimDueOptions): Promise<StoredDelivery[]>;
  /** Extends every claim `owner` holds to `until`; returns how many it holds. */
  renewClaims(owner: string, until: number): Promise<number>;
  /** Gives back the claims `owner` holds: all of them, or those of `keys`. */
  releaseClaims(
    owner: string,
    keys?: readonly { event_id: string; webhook_id: string }[],
  ): Promise<void>;
  /**
   * A group-committing writer.
   *
   * @param options `lingerMs`: how long a commit waits for more units to join it. @default 0
   */
  writer(options?: { lingerMs?: number }): DeliveryWriter;
  /**
   * What `ops` add to another commit (the audit log's).
   *
   * @throws {GatewayError} `INTERNAL` when `ops` holds a `collect_event` op (and, on
   * Deno KV, a `put_dlq` or `delete_dlq` op: only the writer keeps the DLQ's index).
   */
  opsCost(ops: readonly DeliveryOp[]): StoreCost;
  /** Signals new pending deliveries to the process that delivers them. */
  bumpVersion(): Promise<void>;
  /** The counter bumped whenever deliveries are queued by another path (replay, CLI). */
  version(): Promise<bigint>;
  /** Every pending delivery, by event id (oldest first). */
  listPending(): Promise<StoredDelivery[]>;
  /**
   * Pending deliveries (records and fan-out entries) whose event record is
   * missing, at most `limit`, by event id: what a store that lost an event's
   * body while a delivery of it waited leaves (the start-up check dead-letters them).
   */
  listOrphans(limit: number): Promise<StoredDelivery[]>;
  /** The exact body of an event as one of its dead-letter records keeps it, or `null`. */
  findDlqBody(eventId: string): Promise<Uint8Array | null>;
  /** An outbox event and the version stamp of its stored record, or `null`. */
  readEvent(eventId: string): Promise<{ event: OutboxEvent; versionstamp: string } | null>;
  /** Deletes an outbox event no pending delivery refers to; says whether it is gone. */
  collectEventIfUnreferenced(eventId: string): Promise<boolean>;
  /**
   * Dead-letter records, oldest failure first (then by `dlq_id`): every one,
   * or with `limit` one page of them, read through an index (a page costs
   * about `limit` records, however long the queue).
   */
  listDlq(options?: ListDlqPageOptions): Promise<DlqRecord[]>;
  /** How many dead-letter records there are, without reading them. */
  countDlq(): Promise<number>;
  /** One dead-letter record, or `null`. */
  getDlq(dlqId: string): Promise<DlqRecord | null>;
  /** The exact body bytes of a dead-lettered event. */
  readDlqBody(record: DlqRecord): Promise<Uint8Array>;
  /**
   * Queues a fresh delivery for a dead-letter record (same event id and body,
   * fresh schedule) and bumps the deliveries version. The record stays until
   * the delivery succeeds.
   *
   * @returns `"already_queued"` when a delivery of that event to that webhook is pending.
   */
  requeueDlq(
    record: DlqRecord,
    body: Uint8Array,
    timestamp: string,
    now?: number,
  ): Promise<"queued" | "already_queued">;
  /** Deletes dead-letter records and their bodies. */
  deleteDlq(records: readonly Pick<DlqRecord, "dlq_id" | "size">[]): Promise<void>;
  /** The newest entries of a webhook's delivery log, newest first. */
  readLog(webhookId: string, limit?: number): Promise<DeliveryLogEntry[]>;
  /** Appends one entry to a webhook's delivery log and trims it. */
  appendLog(webhookId: string, entry: DeliveryLogEntry): Promise<void>;
  /** Deletes all but the newest `keep` entries of a webhook's log; returns how many went. */
  trimLog(webhookId: string, keep?: number): Promise<number>;
  /** The entry ids of a webhook's delivery log, oldest first. */
  listLogIds(webhookId: string): Promise<string[]>;
  /** Deletes a webhook's whole delivery log. */
  deleteLog(webhookId: string): Promise<void>;
}

/** Bounds of one audit commit, as the adapter sets them. */
export interface AuditLimits {
  /** Largest entry, in bytes of canonical JSON. */
  maxEntryBytes: number;
  /** Most mutations in one commit. */
  commitMaxMutations: number;
  /** Byte budget of one commit. */
  commitMaxBytes: number;
  /** Budget of key bytes in one commit (what the audit log counts for each mutation). */
  commitMaxKeyBytes: number;
  /** Key bytes counted per mutation an entry costs. */
  keyBytesPerMutation: number;
}

/** The stored audit chain: the head and the entries' bytes (hashing lives in `src/audit`). */
export interface AuditStore {
  /** Bounds of one commit. */
  readonly limits: AuditLimits;
  /** What storing one entry of `byteLength` bytes costs. */
  entryCost(byteLength: number): { mutations: number; bytes: number };
  /** Reads the head; `head` is `null` for an empty log. */
  readHead(): Promise<{ head: AuditHead | null; versionstamp: string | null }>;
  /** Reads the head and whether an entry is stored right after `seq`, consistently. */
  readHeadAndNext(seq: number): Promise<{ head: AuditHead | null; nextExists: boolean }>;
  /** The stored entry at `seq`, or `null`. */
  readRecord(seq: number): Promise<AuditRecord | null>;
  /**
   * What an appender needs: the head, its stamp and the entry it points at.
   *
   * @param hintSeq The head seq the caller expects.
   * @throws {GatewayError} `STORE_CORRUPT` when an entry is stored after the head.
   */
  readChainState(hintSeq?: number): Promise<AuditChainState>;
  /**
   * Writes `entries`, the tree's `tiles` and the new `head` atomically,
   * provided the chain is as `guard` says; `outbox` deliveries and staged
   * `writes` ride in the same commit. `entries` may be empty when `tiles`
   * are not (the tree of an older log being built).
   *
   * @returns The commit's version stamp, or `null` when another writer appended first.
   */
  commit(
    guard: AuditCommitGuard,
    entries: readonly AuditEntryWrite[],
    head: AuditHead,
    outbox?: AuditCommitOutbox,
    writes?: readonly StagedWrites[],
    tiles?: readonly AuditTileWrite[],
  ): Promise<string | null>;
  /** What writing `tiles` tiles of `bytes` hash bytes in all costs in a commit. */
  tileCost(tiles: number, bytes: number): { mutations: number; bytes: number; keyBytes: number };
  /** The stored tiles of `refs`, in order; `null` for one not stored. */
  readTiles(refs: readonly AuditTileRef[]): Promise<(Uint8Array | null)[]>;
  /** Streams stored entries in seq order, a page at a time. */
  pages(options?: ReadAuditRecordPagesOptions): AsyncGenerator<AuditRecord[]>;
  /** The log's signing keys, the current one (not retired) first. */
  readKeys(): Promise<AuditLogKey[]>;
  /**
   * Stores a new signing key and retires the current one (`retiring`, as
   * read: its id), in one commit, provided the current key is still
   * `retiring` (`null`: no key yet).
   *
   * @returns Whether it was stored (false: another instance changed the keys first).
   */
  addKey(key: AuditLogKey, retiring: { id: string; retired_at: string } | null): Promise<boolean>;
  /** The latest stored checkpoint, or `null`. */
  readCheckpoint(): Promise<AuditCheckpoint | null>;
  /**
   * Stores `checkpoint` as the latest, unless one of the same or a larger
   * size is stored. @returns Whether it was stored.
   */
  putCheckpoint(checkpoint: AuditCheckpoint): Promise<boolean>;
  /** How far entries were pruned, or `null` when never. */
  readPruned(): Promise<AuditPruned | null>;
  /**
   * Stores tiles outside an append, each unless a copy at least as long is
   * stored: the level-0 tiles of entries a prune is about to delete (appends
   * do not write level 0). At most {@linkcode AuditStore.limits}'
   * `commitMaxMutations` tiles a call.
   */
  keepTiles(tiles: readonly AuditTileWrite[]): Promise<void>;
  /**
   * Records that entries up to `pruned.through` are pruned (never moving the
   * mark back), then deletes their bodies. A crash between the two leaves
   * bodies a later prune deletes.
   *
   * @returns How many entries were deleted.
   */
  prune(pruned: AuditPruned): Promise<number>;
}

/**
 * The durable queue of accepted incoming payloads waiting for their handler
 * tool. A runner claims the jobs it runs (`claim`, or `put`/`stage` with a
 * claim for the jobs it accepts itself): a job under a live claim is nobody
 * else's until the claim lapses, is released, or the job is completed.
 */
export interface IncomingStore {
  /**
   * Whether claims hold across handles, so that several processes run jobs
   * at once, each what it claimed (PostgreSQL). When false (Deno KV), claims
   * live in the handle's memory: one server per store runs the jobs.
   */
  readonly sharedClaims: boolean;
  /** Largest body {@linkcode IncomingStore.stage} takes. */
  readonly stagedBodyMaxBytes: number;
  /**
   * Stores a job and its raw body durably, claimed by `claim` when given;
   * returns the stored job.
   */
  put(
    job: Omit<IncomingJob, "body_bytes" | "chunks">,
    body: Uint8Array,
    claim?: IncomingClaim,
  ): Promise<IncomingJob>;
  /** A job's body, or `null` when it is gone. */
  readBody(job: IncomingJob): Promise<Uint8Array | null>;
  /** Pending jobs, claimed or not, oldest first (copies, inspection; runners claim). */
  list(options?: { limit?: number }): Promise<IncomingJob[]>;
  /**
   * Claims pending jobs, oldest first: those nobody holds, or whose claim
   * lapsed by `now`. Each one returned is `owner`'s alone until `until`,
   * until it is completed, or until released.
   *
   * @throws {GatewayError} `INTERNAL` on bad options (empty owner, limit below 1, times not finite).
   */
  claim(options: ClaimIncomingOptions): Promise<IncomingJob[]>;
  /** Extends every claim `owner` holds to `until`; returns how many it holds. */
  renewClaims(owner: string, until: number): Promise<number>;
  /** Gives back the claims `owner` holds: all of them, or those of the jobs `ids`. */
  releaseClaims(owner: string, ids?: readonly string[]): Promise<void>;
  /**
   * Prepares a job to be written in another commit (the audit entry's),
   * claimed by `claim` when given, from the moment it is written.
   *
   * @returns `undefined` when the body is larger than {@linkcode IncomingStore.stagedBodyMaxBytes}.
   */
  stage(
    job: Omit<IncomingJob, "body_bytes" | "chunks">,
    body: Uint8Array,
    claim?: IncomingClaim,
  ): { job: IncomingJob; writes: StagedWrites } | undefined;
  /**
   * Removes finished jobs, their claims with them (and counts failures);
   * says for each whether it was still there.
   */
  complete(items: readonly { job: IncomingJob; failed: boolean }[]): Promise<boolean[]>;
  /** Removes bodies whose job is gone; returns how many. */
  sweepOrphanBodies(): Promise<number>;
  /** How many jobs wait for their handler (claimed or not), by endpoint id. */
  pendingCounts(): Promise<Record<string, number>>;
  /**
   * Records failed handler calls: each job (still pending) gets the attempt
   * appended and its claim dropped; with `retry_at` it waits, unclaimable,
   * until then; without, it becomes a failed job (`failed_at`, counted as
   * `failed`), kept with its body until replayed or purged. Says for each
   * whether the job was still pending.
   */
  fail(items: readonly IncomingFailure[]): Promise<boolean[]>;
  /** One job, pending or failed, or `null`. */
  get(id: string): Promise<IncomingJob | null>;
  /** Failed jobs, oldest first: all, or one endpoint's; at most `limit`. */
  listFailed(options?: { endpoint_id?: string; limit?: number }): Promise<IncomingJob[]>;
  /**
   * Makes failed jobs pending again with a fresh schedule (no attempts, due
   * now, unclaimed), same id and body; returns the ids that were failed jobs.
   */
  replayFailed(ids: readonly string[]): Promise<string[]>;
  /**
   * Deletes failed jobs with their bodies: those of `ids`, else those failed
   * before `before` (ISO time), else all; returns how many.
   */
  purgeFailed(options?: { ids?: readonly string[]; before?: string }): Promise<number>;
  /**
   * Writes payload log entries (replacing an entry of the same endpoint and
   * id) and keeps each endpoint's newest {@linkcode INCOMING_LOG_SIZE} by id.
   */
  logPayloads(entries: readonly IncomingLogEntry[]): Promise<void>;
  /** An endpoint's payload log, newest first, at most `limit` (default and most: 20). */
  readPayloadLog(endpointId: string, limit?: number): Promise<IncomingLogEntry[]>;
  /**
   * Reserves a sender's delivery id at an endpoint for the payload being
   * accepted as `job_id` (de-duplication), atomically across handles: of
   * several payloads with one id, one gets `"reserved"`. The id is remembered
   * `ttl_ms`; a reservation never confirmed (its accept failed, or the
   * process died) may be taken again after `stale_ms`.
   */
  reserveDedupeKey(options: ReserveDedupeOptions): Promise<DedupeReservation>;
  /** Marks the reservation `job_id` holds as accepted (the job is durable). */
  confirmDedupeKey(endpointId: string, deliveryId: string, jobId: string): Promise<void>;
  /** Drops the reservation `job_id` holds (its accept failed), so a retry is accepted. */
  releaseDedupeKey(endpointId: string, deliveryId: string, jobId: string): Promise<void>;
}

/** The memory plugin's notebook. */
export interface MemoryStore {
  /**
   * Stores a JSON value under `key`, replacing any previous value.
   *
   * @throws {GatewayError} `TOOL_INPUT_INVALID` when the key or value is not acceptable.
   */
  set(key: string, value: unknown, now?: Date): Promise<SetMemoryResult>;
  /** One entry, or `null`. */
  get(key: string): Promise<MemoryEntry | null>;
  /** Entries in key order. */
  list(options?: ListMemoryOptions): Promise<ListMemoryResult>;
  /** Deletes an entry; says whether it existed. */
  delete(key: string): Promise<boolean>;
}

/** Keychain entries: the file backend's encrypted values and the names of OS-held secrets. */
export interface KeychainStore {
  /** Writes (creates or replaces) the entry `name`. */
  put(name: string, record: KeychainRecord): Promise<void>;
  /** The entry `name`, or `null`. */
  get(name: string): Promise<KeychainRecord | null>;
  /** Every entry, by name. */
  list(): Promise<{ name: string; record: KeychainRecord }[]>;
  /** Deletes the entry `name`; says whether it existed. */
  delete(name: string): Promise<boolean>;
}

/** The key check value of the key the store's secrets are sealed with. */
export interface KeyCheckStore {
  /** The recorded check value, or `null` before the first is recorded. */
  read(): Promise<KeyCheckRecord | null>;
  /** Records `record` unless one is recorded; the one recorded either way. */
  writeIfAbsent(record: KeyCheckRecord): Promise<KeyCheckRecord>;
}

/**
 * API keys (hashes, never the keys), shared by every instance on one store.
 */
export interface ApiKeyStore {
  /**
   * Stores a new key.
   *
   * @throws {GatewayError} `CONFLICT` when a key of that name (or hash) exists.
   */
  add(record: ApiKeyRecord): Promise<ApiKeyRecord>;
  /** Every key, oldest first. */
  list(): Promise<ApiKeyRecord[]>;
  /** One key by id, or `null`. */
  get(id: string): Promise<ApiKeyRecord | null>;
  /** One key by name, or `null`. */
  getByName(name: string): Promise<ApiKeyRecord | null>;
  /** The key whose SHA-256 (lowercase hex) is `hash`, or `null`. */
  findByHash(hash: string): Promise<ApiKeyRecord | null>;
  /** Whether any key is stored. */
  any(): Promise<boolean>;
  /** Records that the key `id` was used at `at` (ISO 8601); nothing when it is gone. */
  touch(id: string, at: string): Promise<void>;
  /** Deletes a key (revocation); says whether it existed. */
  remove(id: string): Promise<boolean>;
}

/**
 * Where buckets live: in memory for one server (Deno KV), in the database
 * for instances sharing one (PostgreSQL). Each take is atomic.
 */
export interface RateLimitStore {
  /**
   * Refills the bucket `key` to `now` (ms since the epoch) by `rule` and
   * takes one token if there is one; a bucket never seen starts full.
   */
  take(key: string, rule: RateRule, now: number): Promise<RateTake>;
  /**
   * Drops the buckets that have refilled to their capacity by `now` (a
   * dropped bucket is the same as a missing one: it starts full) and keeps
   * every other. The adapters also do it by themselves: PostgreSQL on a
   * take at most once a minute, memory when a new bucket is past its bound.
   *
   * @returns How many were dropped.
   */
  sweep(now: number): Promise<number>;
}

/**
 * Virtual servers (`toolgate servers`): named tool subsets, shared by every
 * instance on one store. Every change bumps the registrations version, so
 * running servers pick it up.
 */
export interface VirtualServerStore {
  /**
   * Stores a new virtual server.
   *
   * @throws {GatewayError} `CONFLICT` when one of that name exists.
   */
  add(record: VirtualServerRecord): Promise<VirtualServerRecord>;
  /** Every virtual server, by name. */
  list(): Promise<VirtualServerRecord[]>;
  /** One by name, or `null`. */
  get(name: string): Promise<VirtualServerRecord | null>;
  /** Changes its tools or description (and `updated_at`); `null` when there is none of that name. */
  update(name: string, update: VirtualServerUpdate): Promise<VirtualServerRecord | null>;
  /** Deletes one; says whether it existed. */
  remove(name: string): Promise<boolean>;
}

/**
 * Pins of upstream definitions (tools, prompts, resource templates), shared
 * by every instance on one store. Every change bumps the registrations
 * version, so running servers read them again.
 */
export interface PinStore {
  /** Every pin, ordered by plugin, kind, name. */
  list(): Promise<ToolPinRecord[]>;
  /** One pin, or `null`. */
  get(plugin: string, kind: PinKind, name: string): Promise<ToolPinRecord | null>;
  /**
   * Stores `record` in place of `previous`, provided the stored pin is still
   * `previous` (equal as JSON; `null`: none is stored). Of two writers that
   * read the same pin, one wins; the other reads it again.
   *
   * @returns Whether it was stored.
   */
  put(record: ToolPinRecord, previous: ToolPinRecord | null): Promise<boolean>;
  /** Deletes one; says whether it existed. */
  remove(plugin: string, kind: PinKind, name: string): Promise<boolean>;
}

/**
 * Policy rules added at run time (`toolgate policies add`, REST
 * `/policies`), shared by every instance on one store. Every change bumps
 * the registrations version, so running servers read them again.
 */
export interface PolicyStore {
  /**
   * Stores a new rule.
   *
   * @throws {GatewayError} `CONFLICT` when one of that name exists.
   */
  add(record: PolicyRecord): Promise<PolicyRecord>;
  /** Every stored rule, by position, then name. */
  list(): Promise<PolicyRecord[]>;
  /** One by name, or `null`. */
  get(name: string): Promise<PolicyRecord | null>;
  /** Replaces the rule of that name (`updated_at` set by the caller); `null` when none. */
  replace(record: PolicyRecord): Promise<PolicyRecord | null>;
  /** Deletes one; says whether it existed. */
  remove(name: string): Promise<boolean>;
}

/** Calls held for a person's approval, shared by every instance on one store. */
export interface ApprovalStore {
  /**
   * Stores a new approval.
   *
   * @throws {GatewayError} `CONFLICT` when one of that id exists.
   */
  create(record: ApprovalRecord): Promise<ApprovalRecord>;
  /** One by id, or `null`. */
  get(id: string): Promise<ApprovalRecord | null>;
  /**
   * Approvals, newest first: those of `status` only, when given; at most
   * `limit` (default 100).
   */
  list(options?: { status?: ApprovalRecord["status"]; limit?: number }): Promise<ApprovalRecord[]>;
  /**
   * Stores `record` in place of `previous`, provided the stored one is
   * still `previous` (equal as JSON). Of two writers that read the same
   * approval, one wins.
   *
   * @returns Whether it was stored.
   */
  update(record: ApprovalRecord, previous: ApprovalRecord): Promise<boolean>;
}

/** MCP upstreams added at run time, and the plugin states running servers publish. */
export interface UpstreamStore {
  /**
   * Stores a new upstream.
   *
   * @throws {GatewayError} `CONFLICT` when an upstream of that name exists.
   */
  add(input: NewUpstream): Promise<UpstreamRecord>;
  /** Every upstream, by name. */
  list(): Promise<UpstreamRecord[]>;
  /** Removes an upstream; says whether it existed. */
  remove(name: string): Promise<boolean>;
  /** Enables or disables an upstream; `null` when there is none of that name. */
  setEnabled(name: string, enabled: boolean): Promise<UpstreamRecord | null>;
  /** Publishes a running server's plugin states, expiring after `ttlMs`. */
  putServerStatus(status: ServerStatus, ttlMs: number): Promise<void>;
  /** Withdraws a server's published states. */
  deleteServerStatus(serverId: string): Promise<void>;
  /** The states published within `maxAgeMs`. */
  listServerStatuses(maxAgeMs: number, now?: number): Promise<ServerStatus[]>;
}

/**
 * Signed-in web console sessions, shared by every instance on one store, so
 * a session made on one instance is honoured by all and survives restarts.
 * Only the SHA-256 of a session id is kept (by the adapter), never the id:
 * reading the store does not give a session away. Expired sessions are
 * never returned and go by themselves (a Deno KV `expireIn`; a periodic
 * sweep on PostgreSQL).
 */
export interface ConsoleSessionStore {
  /** Stores a session that lasts until `expiresAt` (ms since the epoch). */
  create(id: string, expiresAt: number): Promise<void>;
  /**
   * When the session `id` expires (ms since the epoch), or `null` when there
   * is none or it has expired by `now`.
   *
   * @param now ms since the epoch. @default Date.now()
   */
  get(id: string, now?: number): Promise<number | null>;
  /** Ends the session `id` for every instance; nothing when there is none. */
  delete(id: string): Promise<void>;
}

/** Leases: which process does a piece of shared work. */
export interface LeaseStore {
  /** Takes or renews the delivery lease; says whether this process holds it now. */
  claimDelivery(options: ClaimLeaseOptions): Promise<boolean>;
  /** Gives the delivery lease up, if `owner` holds it. */
  releaseDelivery(owner: string): Promise<void>;
}

/** The counters that change when registrations or pending deliveries do. */
export type ChangeName = "registrations" | "deliveries";

/**
 * Change notification across the instances sharing a store. Where changes
 * are pushed (PostgreSQL `LISTEN/NOTIFY`), listeners hear of them within
 * moments of the commit; where they are not (Deno KV: `kv.watch` does not
 * see other processes' writes), callers keep polling the counters.
 */
export interface ChangeFeed {
  /** Whether other instances' changes and events are pushed to listeners. */
  readonly pushed: boolean;
  /** Calls `listener` after any instance changed `name`'s counter. @returns Unsubscribes. */
  subscribe(listener: (name: ChangeName) => void): () => void;
  /** Sends event envelopes (their JSON text) to the other instances' event listeners. */
  publishEvents(envelopes: readonly string[]): Promise<void>;
  /** Calls `listener` with each envelope another instance published. @returns Unsubscribes. */
  subscribeEvents(listener: (envelope: string) => void): () => void;
}

/** A handle on one store: what toolgate keeps, behind one interface. */
export interface Store {
  /** Which adapter holds the data. */
  readonly kind: "kv" | "postgres";
  /** Where the data lives, for messages: a file path, or a URL without its password. */
  readonly location: string;
  /** The data directory (files such as `dlq.json` live there, whatever the adapter). */
  readonly dataDir: string;
  /** The key sealing secrets at rest (webhook secrets here, the keychain's file backend). */
  readonly dataKey: DataKey;
  /** Webhook registrations; their secrets are sealed at rest and plain text here. */
  readonly webhooks: WebhookStore;
  /** The delivery outbox, DLQ and delivery logs. */
  readonly deliveries: DeliveryStore;
  /** The audit chain. */
  readonly audit: AuditStore;
  /** Incoming jobs. */
  readonly incoming: IncomingStore;
  /** Memory notes. */
  readonly memory: MemoryStore;
  /** Keychain fallback entries. */
  readonly keychain: KeychainStore;
  /** Which key the secrets are sealed with (its check value). */
  readonly keyCheck: KeyCheckStore;
  /** API keys. */
  readonly apiKeys: ApiKeyStore;
  /** Rate limit buckets (in memory on Deno KV, shared rows on PostgreSQL). */
  readonly rateLimits: RateLimitStore;
  /** Virtual servers (named tool subsets). */
  readonly servers: VirtualServerStore;
  /** Upstream registrations and server states. */
  readonly upstreams: UpstreamStore;
  /** Leases. */
  readonly leases: LeaseStore;
  /** Web console sessions (hashes of their ids). */
  readonly consoleSessions: ConsoleSessionStore;
  /** Pins of upstream tools, prompts and resource templates. */
  readonly pins: PinStore;
  /** Policy rules added with `toolgate policies add`. */
  readonly policies: PolicyStore;
  /** Calls held for approval. */
  readonly approvals: ApprovalStore;
  /** Change notification across instances. */
  readonly changes: ChangeFeed;
  /** The registration change counter (webhooks, upstreams, virtual servers, pins, policies), polled by running servers. */
  registrationsVersion(): Promise<bigint>;
  /**
   * This deployment's id (`dep_…`), made on first use and kept in the store,
   * so every instance on one database shares it (the loop marker of
   * outgoing requests).
   */
  deploymentId(): Promise<string>;
  /** Closes the store; safe to call twice. */
  close(): Promise<void>;
}
