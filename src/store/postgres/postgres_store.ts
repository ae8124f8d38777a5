/**
 * The PostgreSQL adapter: several toolgate instances share one database.
 * Migrations are applied when the store opens; every query runs on one
 * bounded pool, and a database that cannot be reached makes calls fail with
 * `STORE_UNAVAILABLE` until it is back.
 *
 * @module
 */
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
import { ensureDataDir } from "../_data_dir.ts";
import { newId } from "../../ids.ts";
import { PgContext, readCounter } from "./_context.ts";
import { createAuditStore } from "./audit.ts";
import { PgChangeFeed } from "./changes.ts";
import {
  describeDatabase,
  openPostgres,
  type OpenPostgresOptions,
  type Sql,
} from "./connection.ts";
import { createDeliveryStore } from "./deliveries.ts";
import { createIncomingStore } from "./incoming.ts";
import { createKeychainStore, createKeyCheckStore } from "./keychain.ts";
import { createApiKeyStore } from "./api_keys.ts";
import { createConsoleSessionStore } from "./console_sessions.ts";
import { createRateLimitStore } from "./rate_limits.ts";
import { createLeaseStore } from "./leases.ts";
import { createMemoryStore } from "./memory.ts";
import { migrate } from "./migrations.ts";
import { createPinStore } from "./pins.ts";
import { createPolicyStore } from "./policies.ts";
import { createApprovalStore } from "./approvals.ts";
import { createUpstreamStore } from "./upstreams.ts";
import { createVirtualServerStore } from "./virtual_servers.ts";
import { createWebhookStore, sealPlaintextSecrets } from "./webhooks.ts";
import { DataKey } from "../data_key.ts";
import { keySealGuard } from "../key_check.ts";

/** Options of {@linkcode openPostgresStore}. */
export interface OpenPostgresStoreOptions {
  /** `postgres://user:password@host:port/database`. */
  url: string;
  /**
   * Data directory (for `dlq.json`); created with mode 0700 when missing,
   * made private again (0700, its files 0600) when it exists.
   */
  dataDir: string;
  /** Apply pending migrations on open. @default true */
  migrate?: boolean;
  /** Pool size and timeouts. @default {} */
  pool?: OpenPostgresOptions;
  /** The key sealing secrets at rest (`TOOLGATE_SECRET_KEY`). @default `<dataDir>/keychain.key` */
  secretKey?: Uint8Array;
}

/** The PostgreSQL adapter of {@linkcode Store}. */
export class PostgresStore implements Store {
  /** Which adapter this is. */
  readonly kind = "postgres";
  /** The database, as a URL without its password. */
  readonly location: string;
  /** The data directory. */
  readonly dataDir: string;
  /** The key sealing secrets at rest. */
  readonly dataKey: DataKey;
  /** The pool, for the modules of `src/store/postgres` and the `db` commands. */
  readonly sql: Sql;
  /** Webhook registrations. */
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
  /** API keys. */
  readonly apiKeys: ApiKeyStore;
  /** Rate limit buckets, one row each. */
  readonly rateLimits: RateLimitStore;
  /** Virtual servers (named tool subsets). */
  readonly servers: VirtualServerStore;
  /** Pins of upstream tools, prompts and resource templates. */
  readonly pins: PinStore;
  /** Policy rules added with `toolgate policies add`. */
  readonly policies: PolicyStore;
  /** Calls held for approval. */
  readonly approvals: ApprovalStore;
  /** Upstream registrations and server states. */
  readonly upstreams: UpstreamStore;
  /** The key check value of the key sealing the secrets. */
  readonly keyCheck: KeyCheckStore;
  /** Leases. */
  readonly leases: LeaseStore;
  /** Web console sessions (hashes of their ids), swept when expired. */
  readonly consoleSessions: ConsoleSessionStore;
  /** Change notification (LISTEN/NOTIFY). */
  readonly changes: ChangeFeed;
  #feed: PgChangeFeed;
  #ctx: PgContext;
  #closed: Promise<void> | null = null;

  /**
   * @param sql An open pool on a migrated database.
   * @param dataDir The data directory.
   * @param dataKey The key sealing secrets at rest. @default the data directory's key file
   */
  constructor(sql: Sql, dataDir: string, dataKey: DataKey = new DataKey({ dataDir })) {
    this.sql = sql;
    this.dataDir = dataDir;
    this.dataKey = dataKey;
    dataKey.guardSeals(keySealGuard(this));
    this.location = describeDatabase(sql);
    const ctx = this.#ctx = new PgContext(sql);
    this.webhooks = createWebhookStore(ctx, dataKey);
    this.deliveries = createDeliveryStore(ctx);
    this.audit = createAuditStore(ctx);
    this.incoming = createIncomingStore(ctx);
    this.memory = createMemoryStore(ctx);
    this.keychain = createKeychainStore(ctx);
    this.keyCheck = createKeyCheckStore(ctx);
    this.apiKeys = createApiKeyStore(ctx);
    this.rateLimits = createRateLimitStore(ctx);
    this.servers = createVirtualServerStore(ctx);
    this.pins = createPinStore(ctx);
    this.policies = createPolicyStore(ctx);
    this.approvals = createApprovalStore(ctx);
    this.upstreams = createUpstreamStore(ctx);
    this.leases = createLeaseStore(ctx);
    this.consoleSessions = createConsoleSessionStore(ctx);
    this.changes = this.#feed = new PgChangeFeed(ctx);
  }

  /** Seals webhook secrets an earlier release stored in plain text; how many records changed. */
  sealPlaintextSecrets(): Promise<number> {
    return sealPlaintextSecrets(this.#ctx, this.dataKey);
  }

  /** The registration change counter. */
  registrationsVersion(): Promise<bigint> {
    return this.#ctx.run((sql) => readCounter(sql, "registrations"));
  }

  /** This deployment's id, made (once, whoever is first) on first use. */
  deploymentId(): Promise<string> {
    return this.#ctx.run(async (sql) => {
      await sql`
        insert into toolgate_meta (key, value) values ('deployment_id', ${sql.json(newId("dep"))})
        on conflict (key) do nothing`;
      const [row] = await sql<{ value: string }[]>`
        select value from toolgate_meta where key = 'deployment_id'`;
      return row.value;
    });
  }

  /** Closes the pool, letting running queries finish (5 s at most); safe to call twice. */
  close(): Promise<void> {
    this.#closed ??= this.#feed.close().then(() => this.sql.end({ timeout: 5 }));
    return this.#closed;
  }
}

/**
 * Opens the PostgreSQL store at `url`, applying pending migrations.
 *
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be
 * reached; `STORE_CORRUPT` when it was migrated by a newer toolgate.
 */
export async function openPostgresStore(options: OpenPostgresStoreOptions): Promise<PostgresStore> {
  const { url, dataDir, migrate: apply = true, pool = {}, secretKey } = options;
  await ensureDataDir(dataDir);
  const sql = openPostgres(url, pool);
  try {
    if (apply) await migrate(sql);
  } catch (error) {
    await sql.end({ timeout: 1 });
    throw error;
  }
  const store = new PostgresStore(sql, dataDir, new DataKey({ dataDir, key: secretKey }));
  // Not migrated (a db command on an old schema): its secrets wait for the next open.
  if (apply) {
    try {
      await store.sealPlaintextSecrets();
    } catch (error) {
      await store.close();
      throw error;
    }
  }
  return store;
}
