/**
 * Contract: change counters that running servers poll.
 *
 * @module
 */
import { assert, assertEquals } from "../../_asserts.ts";
import type { ContractCase } from "./_contract.ts";

/** Cases of the registration counter. */
export const CHANGES_CONTRACT: readonly ContractCase[] = [
  {
    name: "registrationsVersion() grows with every registration change, seen by another handle",
    async run({ store, another }) {
      const other = await another();
      const before = await other.registrationsVersion();
      const hook = await store.webhooks.addOutgoing({ url: "https://example.com/h", events: "*" });
      const afterAdd = await other.registrationsVersion();
      assert(afterAdd > before, `version ${afterAdd} did not grow from ${before}`);
      assertEquals(await store.webhooks.remove(hook.id), "outgoing");
      assert(await other.registrationsVersion() > afterAdd);
    },
  },
  {
    name: "deploymentId() is made once and shared by every handle on the store",
    async run({ store, another }) {
      const other = await another();
      const [first, second] = await Promise.all([store.deploymentId(), other.deploymentId()]);
      assert(/^dep_[0-9a-z]+$/.test(first), first);
      assertEquals(second, first);
      assertEquals(await store.deploymentId(), first);
    },
  },
];
