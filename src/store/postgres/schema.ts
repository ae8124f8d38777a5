/**
 * The tables of the PostgreSQL store, as migration 1 creates them: each part
 * of the adapter owns the DDL of its tables.
 *
 * @module
 */
import { CONTEXT_SCHEMA } from "./_context.ts";
import { CHANGES_SCHEMA } from "./changes.ts";
import { CONSOLE_SESSIONS_SCHEMA } from "./console_sessions.ts";
import { API_KEYS_SCHEMA } from "./api_keys.ts";
import { AUDIT_SCHEMA } from "./audit_schema.ts";
import { DELIVERIES_SCHEMA } from "./deliveries.ts";
import { INCOMING_SCHEMA } from "./incoming.ts";
import { KEYCHAIN_SCHEMA } from "./keychain.ts";
import { LEASES_SCHEMA } from "./leases.ts";
import { MEMORY_SCHEMA } from "./memory.ts";
import { RATE_LIMITS_SCHEMA } from "./rate_limits.ts";
import { UPSTREAMS_SCHEMA } from "./upstreams.ts";
import { VIRTUAL_SERVERS_SCHEMA } from "./virtual_servers.ts";
import { WEBHOOKS_SCHEMA } from "./webhooks.ts";

/** The SQL of migration 1: every table of the store. */
export const INITIAL_SCHEMA: string = [
  CONTEXT_SCHEMA,
  CHANGES_SCHEMA,
  WEBHOOKS_SCHEMA,
  UPSTREAMS_SCHEMA,
  KEYCHAIN_SCHEMA,
  MEMORY_SCHEMA,
  LEASES_SCHEMA,
  DELIVERIES_SCHEMA,
  AUDIT_SCHEMA,
  INCOMING_SCHEMA,
  API_KEYS_SCHEMA,
  RATE_LIMITS_SCHEMA,
  VIRTUAL_SERVERS_SCHEMA,
  CONSOLE_SESSIONS_SCHEMA,
].join("\n");
