/**
 * The contract every storage adapter honours, written once and run against
 * each adapter (`tests/store/contract_kv_test.ts`,
 * `tests/store/contract_postgres_test.ts`). A case gets a fresh, empty store
 * and can open a second handle on the same data, as another process or
 * instance would.
 *
 * @module
 */
import type { Store } from "../../../src/store/mod.ts";

/** What a contract case works with. */
export interface ContractEnv {
  /** A fresh, empty store. */
  store: Store;
  /** Opens another handle on the same data (another process or instance); closed after the case. */
  another(): Promise<Store>;
  /** Which adapter runs the case, for the rare case that must say so. */
  adapter: "kv" | "postgres";
}

/** One behaviour of the storage interface. */
export interface ContractCase {
  /** What the case shows, as a test name. */
  name: string;
  /** Runs the case; throws (assertion) when the adapter breaks the contract. */
  run(env: ContractEnv): Promise<void>;
}
