/**
 * Contract: stored policy rules. One added on one handle is found and listed
 * on another, by position then name; names are unique; replace stores a
 * rule only in place of one of its name; remove deletes; every change bumps
 * the registrations version, and a write refused changes nothing; a record
 * that does not match the schema is refused.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type { PolicyRecord } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

function policy(name: string, position: number): PolicyRecord {
  return {
    name,
    rule: { name, tools: ["files__*"], when: 'args.path.startsWith("/etc/")', effect: "deny" },
    position,
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
  };
}

/** Cases of the stored policy rules. */
export const POLICIES_CONTRACT: readonly ContractCase[] = [
  {
    name: "policies: added on one handle and found on another; a second add of the name fails",
    async run({ store, another }) {
      assertEquals(await store.policies.list(), []);
      const first = policy("no-etc", 10);
      assertEquals(await store.policies.add(first), first);
      const other = await another();
      assertEquals(await other.policies.get("no-etc"), first);
      assertEquals(await other.policies.get("nobody"), null);
      const v1 = await store.registrationsVersion();
      const error = await assertRejects(
        () => other.policies.add({ ...policy("no-etc", 1), rule: { effect: "allow" } }),
        GatewayError,
        "A policy named no-etc exists",
      );
      assertEquals(error.code, "CONFLICT");
      assertEquals(error.details, { name: "no-etc" });
      assertEquals(await store.policies.get("no-etc"), first);
      assertEquals(await other.policies.list(), [first]);
      assertEquals(await other.registrationsVersion(), v1, "an add that fails changes nothing");
    },
  },
  {
    name: "policies: listed by position, then name, on another handle",
    async run({ store, another }) {
      const policies = [
        policy("b.rule", 20),
        policy("late", 2 ** 40),
        policy("a-rule", 20),
        policy("first", -5),
        policy("Zeta", 20),
        policy("ten", 10),
        policy("a_rule", 20),
      ];
      for (const record of policies) await store.policies.add(record);
      const other = await another();
      assertEquals((await other.policies.list()).map(({ name }) => name), [
        "first",
        "ten",
        "Zeta",
        "a-rule",
        "a_rule",
        "b.rule",
        "late",
      ]);
      assertEquals((await other.policies.list())[0], policy("first", -5));
    },
  },
  {
    name:
      "policies: replace stores a rule in place of one of its name; without one it stores nothing",
    async run({ store, another }) {
      const first = policy("no-etc", 10);
      await store.policies.add(first);
      const other = await another();
      const v1 = await other.registrationsVersion();
      const second: PolicyRecord = {
        ...first,
        rule: {
          name: "no-etc",
          tools: ["files__read_file"],
          effect: "require_approval",
          approver: "caller",
        },
        position: 30,
        updated_at: "2026-01-02T00:00:00.000Z",
      };
      assertEquals(await store.policies.replace(second), second);
      assertEquals(await other.policies.get("no-etc"), second);
      const v2 = await other.registrationsVersion();
      assert(v2 > v1, "a replace bumps the registrations version");
      assertEquals(await other.policies.replace(policy("nobody", 1)), null);
      assertEquals(await store.policies.get("nobody"), null);
      assertEquals(await store.policies.list(), [second]);
      assertEquals(await store.registrationsVersion(), v2, "a replace of none changes nothing");
    },
  },
  {
    name: "policies: remove says whether it existed; every add and remove bumps registrations",
    async run({ store, another }) {
      const other = await another();
      const v0 = await other.registrationsVersion();
      await store.policies.add(policy("no-etc", 10));
      const v1 = await other.registrationsVersion();
      assert(v1 > v0, "an add bumps the registrations version");
      assertEquals(await other.policies.remove("no-etc"), true);
      const v2 = await store.registrationsVersion();
      assert(v2 > v1, "a remove bumps the registrations version");
      assertEquals(await store.policies.get("no-etc"), null);
      assertEquals(await store.policies.remove("no-etc"), false);
      assertEquals(await other.registrationsVersion(), v2, "a remove of none changes nothing");
      assertEquals(await store.policies.list(), []);
    },
  },
  {
    name: "policies: add and replace refuse a record that does not match the schema",
    async run({ store }) {
      const good = policy("no-etc", 10);
      await store.policies.add(good);
      const v1 = await store.registrationsVersion();
      const bad: unknown[] = [
        { ...good, name: "" },
        { ...good, name: "no etc" },
        { ...good, name: "-no-etc" },
        { ...good, name: "x".repeat(65) },
        { ...good, rule: ["deny"] },
        { ...good, position: 1.5 },
        { ...good, position: "1" },
        { ...good, created_at: undefined },
        { ...good, extra: true },
      ];
      for (const record of bad) {
        await assertRejects(() => store.policies.add(record as PolicyRecord));
        await assertRejects(() => store.policies.replace(record as PolicyRecord));
      }
      assertEquals(await store.policies.list(), [good]);
      assertEquals(await store.registrationsVersion(), v1, "a refused record changes nothing");
    },
  },
];
