/**
 * The egress policy a process builds from its configuration.
 *
 * @module
 */
import type { Config } from "../config/mod.ts";
import { type CaStore, EgressPolicy, type EgressPolicyOptions } from "./policy.ts";

/** Environment variables through which `fetch` sends requests to a proxy. */
export const PROXY_VARIABLES = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "all_proxy",
] as const;

/** The parts of {@linkcode Config} the policy reads. */
export type EgressConfig = Pick<Config, "egress" | "server" | "env">;

/**
 * The policy of `config`: `egress.allow`, the configured listening address
 * (`server.host`:`server.port`, unless the port is 0) as toolgate's own, and
 * whether a proxy is configured in the environment.
 *
 * @example
 * ```ts
 * const egress = egressPolicyFromConfig(config, { marker: await store.deploymentId() });
 * ```
 */
export function egressPolicyFromConfig(
  config: EgressConfig,
  options: Omit<EgressPolicyOptions, "allow" | "proxied"> = {},
): EgressPolicy {
  const listening = [...(options.listening ?? [])];
  if (config.server.port !== 0) {
    listening.push({ hostname: config.server.host, port: config.server.port });
  }
  return new EgressPolicy({
    ...options,
    allow: config.egress.allow,
    listening,
    proxied: PROXY_VARIABLES.some((name) => Boolean(config.env[name])),
    caCerts: [...extraCaCerts(config.env.DENO_CERT), ...(options.caCerts ?? [])],
    caStores: options.caStores ?? caStores(config.env.DENO_TLS_CA_STORE),
  });
}

/**
 * The root stores `DENO_TLS_CA_STORE` names (`mozilla`, `system`, comma
 * separated), as Deno reads it for `fetch`; unset or naming neither: Mozilla's.
 */
function caStores(value: string | undefined): CaStore[] {
  const named = (value ?? "").split(",").map((name) => name.trim());
  const stores = (["mozilla", "system"] as const).filter((store) => named.includes(store));
  return stores.length ? stores : ["mozilla"];
}

/**
 * The certificates of `DENO_CERT` (a PEM file Deno adds to `fetch`'s trusted
 * roots, e.g. a company CA), for the connections toolgate makes itself. An
 * unreadable file adds nothing: Deno reports it itself.
 */
function extraCaCerts(path: string | undefined): string[] {
  if (!path) return [];
  try {
    const pem = Deno.readTextFileSync(path);
    return pem.includes("-----BEGIN CERTIFICATE-----") ? [pem] : [];
  } catch {
    return [];
  }
}

const DEFAULTS = new WeakMap<object, EgressPolicy>();

/**
 * One policy per configuration object, for code handed only a config (a
 * plugin built without the process's policy): the same checks, without the
 * loop marker or the address a server bound to port 0.
 */
export function defaultEgressPolicy(config: EgressConfig): EgressPolicy {
  let policy = DEFAULTS.get(config);
  if (!policy) DEFAULTS.set(config, policy = egressPolicyFromConfig(config));
  return policy;
}
