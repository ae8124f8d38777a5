/**
 * Every contract case, by part of the storage interface.
 *
 * @module
 */
import type { ContractCase } from "./_contract.ts";
import { API_KEYS_CONTRACT } from "./api_keys_contract.ts";
import { APPROVALS_CONTRACT } from "./approvals_contract.ts";
import { AUDIT_CONTRACT } from "./audit_contract.ts";
import { CHANGES_CONTRACT } from "./changes_contract.ts";
import { CLAIMS_CONTRACT } from "./claims_contract.ts";
import { CONSOLE_SESSIONS_CONTRACT } from "./console_sessions_contract.ts";
import { DEDUPE_CONTRACT } from "./dedupe_contract.ts";
import { DELIVERIES_CONTRACT } from "./deliveries_contract.ts";
import { INCOMING_CONTRACT } from "./incoming_contract.ts";
import { INCOMING_CLAIMS_CONTRACT } from "./incoming_claims_contract.ts";
import { INCOMING_RETRY_CONTRACT } from "./incoming_retry_contract.ts";
import { KEYCHAIN_CONTRACT } from "./keychain_contract.ts";
import { LEASES_CONTRACT } from "./leases_contract.ts";
import { MEMORY_CONTRACT } from "./memory_contract.ts";
import { OUTCOMES_CONTRACT } from "./outcomes_contract.ts";
import { PINS_CONTRACT } from "./pins_contract.ts";
import { POLICIES_CONTRACT } from "./policies_contract.ts";
import { RATE_LIMITS_CONTRACT } from "./rate_limits_contract.ts";
import { UPSTREAMS_CONTRACT } from "./upstreams_contract.ts";
import { VIRTUAL_SERVERS_CONTRACT } from "./virtual_servers_contract.ts";
import { WEBHOOKS_CONTRACT } from "./webhooks_contract.ts";
import { WEBHOOK_UPDATES_CONTRACT } from "./webhook_updates_contract.ts";

export type { ContractCase, ContractEnv } from "./_contract.ts";

/** All cases, in a stable order. */
export const CONTRACT: readonly ContractCase[] = [
  ...CHANGES_CONTRACT,
  ...AUDIT_CONTRACT,
  ...INCOMING_CONTRACT,
  ...INCOMING_CLAIMS_CONTRACT,
  ...INCOMING_RETRY_CONTRACT,
  ...DELIVERIES_CONTRACT,
  ...WEBHOOKS_CONTRACT,
  ...WEBHOOK_UPDATES_CONTRACT,
  ...UPSTREAMS_CONTRACT,
  ...KEYCHAIN_CONTRACT,
  ...MEMORY_CONTRACT,
  ...LEASES_CONTRACT,
  ...CLAIMS_CONTRACT,
  ...OUTCOMES_CONTRACT,
  ...DEDUPE_CONTRACT,
  ...API_KEYS_CONTRACT,
  ...RATE_LIMITS_CONTRACT,
  ...VIRTUAL_SERVERS_CONTRACT,
  ...PINS_CONTRACT,
  ...POLICIES_CONTRACT,
  ...APPROVALS_CONTRACT,
  ...CONSOLE_SESSIONS_CONTRACT,
];
