/**
 * Whether this instance can serve calls and deliver: the store answers a
 * cheap read in time, and nothing that stops deliveries (a webhook secret
 * this instance cannot decrypt) was met. `GET /health/ready` answers from
 * it, `/health` adds its reasons, `/metrics` shows it as `toolgate_ready`.
 *
 * @module
 */
import type { HealthReason } from "./health.ts";

/** Options of {@linkcode Readiness}. */
export interface ReadinessOptions {
  /** The store probed: one cheap read (the registration counter). */
  store: { registrationsVersion(): Promise<bigint> };
  /** Problems met elsewhere that stop this instance from serving or delivering. @default none */
  blockers?: () => readonly HealthReason[];
  /** Longest wait for the store's answer, in ms. @default 2000 */
  timeoutMs?: number;
  /** How long one probe's answer is reused (probes of several checkers share it), in ms. @default 1000 */
  cacheMs?: number;
  /** @default Date.now */
  now?: () => number;
}

/** The readiness of one instance; see the module documentation. */
export class Readiness {
  #store: ReadinessOptions["store"];
  #blockers: () => readonly HealthReason[];
  #timeoutMs: number;
  #cacheMs: number;
  #now: () => number;
  #probe: { at: number; reasons: HealthReason[] } | undefined;
  #probing: Promise<HealthReason[]> | undefined;
  /** When the store first failed a probe in the current outage. */
  #downSince: string | undefined;
  #ready: boolean | undefined;

  constructor(options: ReadinessOptions) {
    const { store, blockers = () => [], timeoutMs = 2000, cacheMs = 1000, now = Date.now } =
      options;
    if (!(timeoutMs > 0)) throw new RangeError(`Invalid timeoutMs: ${timeoutMs} is not positive`);
    if (!(cacheMs >= 0)) throw new RangeError(`Invalid cacheMs: ${cacheMs} is not 0 or more`);
    this.#store = store;
    this.#blockers = blockers;
    this.#timeoutMs = timeoutMs;
    this.#cacheMs = cacheMs;
    this.#now = now;
  }

  /** The outcome of the last check: `undefined` before the first. */
  get ready(): boolean | undefined {
    return this.#ready;
  }

  /**
   * Checks the store (at most once per `cacheMs`) and the blockers.
   *
   * @returns The reasons this instance cannot serve or deliver; empty when ready.
   */
  async check(): Promise<HealthReason[]> {
    const reasons = [...await this.#storeReasons(), ...this.#blockers()];
    this.#ready = reasons.length === 0;
    return reasons;
  }

  #storeReasons(): Promise<HealthReason[]> {
    const probe = this.#probe;
    if (probe && this.#now() - probe.at < this.#cacheMs) return Promise.resolve(probe.reasons);
    this.#probing ??= this.#probeStore().then((reasons) => {
      this.#probe = { at: this.#now(), reasons };
      return reasons;
    }).finally(() => this.#probing = undefined);
    return this.#probing;
  }

  async #probeStore(): Promise<HealthReason[]> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Error("timed out");
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(timedOut), this.#timeoutMs);
    });
    try {
      await Promise.race([this.#store.registrationsVersion(), timeout]);
      this.#downSince = undefined;
      return [];
    } catch (error) {
      this.#downSince ??= new Date(this.#now()).toISOString();
      // No driver text: `/health` needs no token (the server log has the details).
      const why = error === timedOut
        ? `it did not answer within ${this.#timeoutMs} ms`
        : "a read failed";
      return [{
        component: "store",
        code: "STORE_UNAVAILABLE",
        message: `The store is unreachable: ${why}; tool calls and deliveries wait for it`,
        since: this.#downSince,
      }];
    } finally {
      clearTimeout(timer);
    }
  }
}
