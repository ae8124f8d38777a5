/**
 * Contract: approvals. One created on one handle is found on another; ids
 * are unique; listings are newest first (by time, ties by id, descending),
 * by status, at most `limit`; an update is guarded by the record it
 * replaces (equal as JSON): of two writers that read the same approval one
 * wins. No write bumps the registrations version. A record that does not
 * match the schema is refused, and Deno KV refuses one too large for a KV
 * value with `PAYLOAD_TOO_LARGE`.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type { ApprovalRecord } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

function approval(id: string, overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    id,
    status: "pending",
    tool: "memory_set",
    plugin: "memory",
    caller: { kind: "key", id: "key_01", name: "ci" },
    caller_ref: "key:key_01",
    args: { key: "k", value: 1 },
    args_sha256: "a".repeat(64),
    policy: "ask",
    policy_sha256: "b".repeat(64),
    approvers: ["admin"],
    reason: null,
    transport: "rest",
    server: null,
    created_at: "2026-12-04T10:00:00.000Z",
    expires_at: "2026-12-04T10:30:00.000Z",
    decided_by: null,
    decided_at: null,
    decision_reason: null,
    running: null,
    ran: null,
    ...overrides,
  };
}

const ID = "apr_01JABCDEFGHJKMNPQRSTV";

/** `record` approved by `by`. */
function approved(record: ApprovalRecord, by: string): ApprovalRecord {
  return {
    ...record,
    status: "approved",
    decided_by: by,
    decided_at: "2026-12-04T10:05:00.000Z",
    decision_reason: `ok by ${by}`,
  };
}

/** The same record with every object's keys in reverse order. */
function reordered<T>(value: T): T {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(reordered) as T;
  const entries = Object.entries(value).reverse().map(([key, item]) => [key, reordered(item)]);
  return Object.fromEntries(entries) as T;
}

/** Cases of the approvals. */
export const APPROVALS_CONTRACT: readonly ContractCase[] = [
  {
    name: "approvals: created on one handle and found on another; a second create of the id fails",
    async run({ store, another }) {
      const v0 = await store.registrationsVersion();
      const first = approval(ID);
      assertEquals(await store.approvals.get(ID), null);
      assertEquals(await store.approvals.create(first), first);
      const other = await another();
      assertEquals(await other.approvals.get(ID), first);
      assertEquals(await other.approvals.get("apr_01JABCDEFGHJKMNPQRSTW"), null);
      const error = await assertRejects(
        () => other.approvals.create(approval(ID, { tool: "memory_delete" })),
        GatewayError,
        `An approval with id ${ID} exists`,
      );
      assertEquals(error.code, "CONFLICT");
      assertEquals(error.details, { id: ID });
      assertEquals(await store.approvals.get(ID), first);
      assertEquals(await other.approvals.list(), [first]);
      assertEquals(await other.registrationsVersion(), v0, "approvals are not registrations");
    },
  },
  {
    name: "approvals: listed newest first (ties by id, descending), by status, at most limit",
    async run({ store, another }) {
      assertEquals(await store.approvals.list(), []);
      const records = [
        approval("apr_0000000000A", { created_at: "2026-12-04T10:00:00.000Z" }),
        approval("apr_0000000000B", { created_at: "2026-12-04T10:02:00.000Z", status: "denied" }),
        // Later than 10:00:00Z, though it sorts before it as text.
        approval("apr_0000000000C", { created_at: "2026-12-04T10:00:00.500Z" }),
        approval("apr_0000000000D", { created_at: "2026-12-04T10:00:00Z", status: "expired" }),
        // 10:30Z, given with an offset.
        approval("apr_0000000000E", { created_at: "2026-12-04T11:30:00.000+01:00" }),
        approval("apr_0000000000F", { created_at: "2026-12-04T10:02:00.000Z" }),
        approval("apr_0000000000G", { created_at: "2026-12-03T23:59:59.999Z", status: "denied" }),
      ];
      for (const record of records) await store.approvals.create(record);
      const other = await another();
      const ids = async (options?: Parameters<typeof other.approvals.list>[0]) =>
        (await other.approvals.list(options)).map(({ id }) => id.slice(-1));
      assertEquals(await ids(), ["E", "F", "B", "C", "D", "A", "G"]);
      assertEquals(await ids({ status: "pending" }), ["E", "F", "C", "A"]);
      assertEquals(await ids({ status: "denied" }), ["B", "G"]);
      assertEquals(await ids({ status: "approved" }), []);
      assertEquals(await ids({ limit: 3 }), ["E", "F", "B"]);
      assertEquals(await ids({ status: "pending", limit: 2 }), ["E", "F"]);
      assertEquals(await ids({ limit: 1_000_000 }), ["E", "F", "B", "C", "D", "A", "G"]);
      assertEquals((await other.approvals.list({ limit: 1 }))[0], records[4]);
      for (const limit of [0, -1, 1.5, Number.NaN]) {
        await assertRejects(() => other.approvals.list({ limit }), RangeError);
      }
    },
  },
  {
    name: "approvals: a listing holds at most 100 unless limit says otherwise",
    async run({ store }) {
      const at = Date.parse("2026-12-04T10:00:00.000Z");
      const records = Array.from(
        { length: 101 },
        (_, i) =>
          approval(`apr_${String(i).padStart(10, "0")}`, {
            created_at: new Date(at + i * 1000).toISOString(),
          }),
      );
      await Promise.all(records.map((record) => store.approvals.create(record)));
      const listed = await store.approvals.list();
      assertEquals(listed.length, 100);
      assertEquals(listed[0], records[100]);
      assertEquals(listed[99], records[1]);
      assertEquals((await store.approvals.list({ limit: 101 })).length, 101);
    },
  },
  {
    name: "approvals: an update with the record as read replaces it; one with a stale record loses",
    async run({ store, another }) {
      const first = approval(ID);
      await store.approvals.create(first);
      const v0 = await store.registrationsVersion();
      const other = await another();
      const read = await other.approvals.get(ID);
      assert(read, "the approval is seen on another handle");
      const second = approved(read, "admin");
      assertEquals(await other.approvals.update(second, read), true);
      assertEquals(await store.approvals.get(ID), second);
      assertEquals(await store.approvals.list({ status: "approved" }), [second]);
      assertEquals(await store.approvals.list({ status: "pending" }), []);
      // `first` is stale now: nothing changes.
      assertEquals(await store.approvals.update(approved(first, "key:key_02"), first), false);
      assertEquals(
        await store.approvals.update({ ...first, status: "expired" }, first),
        false,
      );
      assertEquals(await other.approvals.get(ID), second);
      assertEquals(await other.approvals.list(), [second]);
      // Equal as JSON is equal, whatever the order of the keys.
      const third: ApprovalRecord = {
        ...second,
        running: { by: "srv_1", since: "2026-12-04T10:06:00.000Z" },
      };
      assertEquals(await store.approvals.update(third, reordered(second)), true);
      const fourth: ApprovalRecord = {
        ...third,
        running: null,
        ran: { at: "2026-12-04T10:06:01.000Z", ok: true, output: { stored: true } },
      };
      assertEquals(await other.approvals.update(fourth, third), true);
      assertEquals(await store.approvals.get(ID), fourth);
      // An update of an approval that is not stored loses, and stores nothing.
      const absent = approval("apr_01JABCDEFGHJKMNPQRSTW");
      assertEquals(await store.approvals.update(approved(absent, "admin"), absent), false);
      assertEquals(await store.approvals.get(absent.id), null);
      assertEquals(await other.registrationsVersion(), v0, "approvals are not registrations");
    },
  },
  {
    name: "approvals: of two writers that read the same approval, one wins",
    async run({ store, another }) {
      const first = approval(ID);
      await store.approvals.create(first);
      const other = await another();
      for (let round = 0; round < 5; round++) {
        const read = await store.approvals.get(ID);
        assert(read);
        const a = approved(read, `key:a${round}`);
        const b = approved(read, `key:b${round}`);
        const won = await Promise.all([
          store.approvals.update(a, read),
          other.approvals.update(b, read),
        ]);
        assertEquals(won.filter(Boolean).length, 1, `exactly one wins: ${won}`);
        assertEquals(await other.approvals.get(ID), won[0] ? a : b);
      }
    },
  },
  {
    name: "approvals: create and update refuse a record that does not match the schema",
    async run({ store }) {
      const good = approval(ID);
      await store.approvals.create(good);
      const bad: unknown[] = [
        { ...good, id: "req_01JABCDEFGHJKMNPQRSTV" },
        { ...good, id: "apr_short" },
        { ...good, status: "running" },
        { ...good, tool: "" },
        { ...good, args: ["k", 1] },
        { ...good, args_sha256: "sha256:" + "a".repeat(64) },
        { ...good, policy_sha256: "A".repeat(64) },
        { ...good, approvers: [] },
        { ...good, created_at: "yesterday" },
        { ...good, expires_at: undefined },
        { ...good, running: { by: "srv_1" } },
        { ...good, ran: { at: "2026-12-04T10:06:01.000Z" } },
        { ...good, extra: true },
      ];
      for (const record of bad) {
        await assertRejects(() => store.approvals.create(record as ApprovalRecord));
        await assertRejects(() => store.approvals.update(record as ApprovalRecord, good));
      }
      assertEquals(await store.approvals.list(), [good]);
    },
  },
  {
    name: "approvals: Deno KV refuses one too large for a KV value; PostgreSQL stores it",
    async run({ store, another, adapter }) {
      const first = approval(ID);
      await store.approvals.create(first);
      const records = {
        // Over 60 KiB of arguments.
        args: approval("apr_0000000000A", { args: { text: "a".repeat(70_000) } }),
        // 40 KB of UTF-8, but KV keeps a string with a character past U+00FF at two bytes each.
        wide: approval("apr_0000000000B", { args: { text: "a".repeat(40_000) + "€" } }),
        // Over 60 KiB of the call's output, once it ran.
        output: {
          ...approved(first, "admin"),
          ran: { at: "2026-12-04T10:06:01.000Z", ok: true, output: { text: "x".repeat(70_000) } },
        },
      };
      // 100 KB of UTF-8, but KV keeps a string of characters up to U+00FF at one byte each.
      const narrow = approval("apr_0000000000C", { args: { text: "é".repeat(50_000) } });
      assertEquals(await store.approvals.create(narrow), narrow);
      const other = await another();
      if (adapter === "postgres") {
        assertEquals(await store.approvals.create(records.args), records.args);
        assertEquals(await store.approvals.create(records.wide), records.wide);
        assertEquals(await store.approvals.update(records.output, first), true);
        assertEquals(await other.approvals.get(ID), records.output);
        return;
      }
      for (const record of [records.args, records.wide]) {
        const error = await assertRejects(
          () => store.approvals.create(record),
          GatewayError,
          `Approval ${record.id} is too large to store (`,
        );
        assertEquals(error.code, "PAYLOAD_TOO_LARGE");
        assert(/\((\d+) bytes over 60 KiB\): /.test(error.message), error.message);
        assertEquals(await other.approvals.get(record.id), null);
      }
      const error = await assertRejects(
        () => store.approvals.update(records.output, first),
        GatewayError,
        `Approval ${ID} is too large to store (`,
      );
      assertEquals(error.code, "PAYLOAD_TOO_LARGE");
      assertEquals(await other.approvals.get(ID), first);
      assertEquals(await other.approvals.get(narrow.id), narrow);
    },
  },
];
