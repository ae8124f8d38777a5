/**
 * The one egress policy: every outgoing connection toolgate makes on
 * someone's behalf (`http_request`, webhook deliveries, HTTP MCP upstreams)
 * is checked here after DNS resolution and goes to the address that was
 * checked.
 *
 * - Profile `public` (`http_request`, webhooks): public addresses only.
 * - Profile `operator` (HTTP MCP upstreams): also loopback, private,
 *   unique-local and carrier-grade NAT addresses; never link-local or cloud
 *   metadata ones.
 * - `egress.allow` (hosts, `*.suffix`, addresses, CIDRs) opens more.
 * - Toolgate's own listening addresses are refused always.
 *
 * A refusal is a `GatewayError` with code `EGRESS_DENIED` naming the host,
 * the address and the setting that would allow it.
 *
 * @example
 * ```ts
 * import { EgressPolicy, egressFetch } from "./src/egress/mod.ts";
 * const policy = new EgressPolicy({ allow: config.egress.allow });
 * const fetch = egressFetch({ policy, profile: "public" });
 * await fetch("http://127.0.0.1/"); // throws EGRESS_DENIED
 * ```
 *
 * @module
 */
export { allowEntryProblem } from "./allow_list.ts";
export {
  defaultEgressPolicy,
  type EgressConfig,
  egressPolicyFromConfig,
  PROXY_VARIABLES,
} from "./from_config.ts";
export { type EgressFetch, egressFetch, type EgressFetchOptions } from "./fetch.ts";
export {
  type CaStore,
  EgressPolicy,
  type EgressPolicyOptions,
  type EgressProfile,
  type EgressTarget,
  type ListenAddress,
  type LookupAddress,
  LookupError,
  type LookupFunction,
  LOOP_HEADER,
} from "./policy.ts";
export { type AddressRange, classify as classifyAddress } from "./_ranges.ts";
