/**
 * Contract: pins of upstream definitions. A put is guarded by the pin it
 * replaces (none, or the one read, equal as JSON): of two writers that read
 * the same pin one wins. Pins are listed by plugin, kind, name and seen on
 * another handle; remove deletes; every change bumps the registrations
 * version; a record that does not match the schema is refused.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import type { PinKind, PinnedDefinition, ToolPinRecord } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

function definition(description: string, seed: string): PinnedDefinition {
  return {
    hash: seed.repeat(64),
    definition: {
      name: "read_file",
      description,
      inputSchema: { type: "object", properties: { path: { type: "string" } } },
    },
    seen_at: "2026-01-01T00:00:00.000Z",
  };
}

function pin(plugin: string, kind: PinKind, name: string): ToolPinRecord {
  return {
    plugin,
    kind,
    name,
    status: "pinned",
    pinned: definition("Reads a file", "a"),
    pending: null,
    decided_by: null,
    updated_at: "2026-01-01T00:00:00.000Z",
  };
}

/** `record` as it was first pinned, then changed upstream: quarantined. */
function changed(record: ToolPinRecord, description: string): ToolPinRecord {
  return {
    ...record,
    status: "changed",
    pending: definition(description, "b"),
    updated_at: "2026-01-02T00:00:00.000Z",
  };
}

/** The same record with every object's keys in reverse order. */
function reordered<T>(value: T): T {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(reordered) as T;
  const entries = Object.entries(value).reverse().map(([key, item]) => [key, reordered(item)]);
  return Object.fromEntries(entries) as T;
}

/** Cases of the pins. */
export const PINS_CONTRACT: readonly ContractCase[] = [
  {
    name: "pins: a put without a previous pin creates it; a second one loses and stores nothing",
    async run({ store, another }) {
      const first = pin("files", "tool", "read_file");
      assertEquals(await store.pins.get("files", "tool", "read_file"), null);
      assertEquals(await store.pins.put(first, null), true);
      const other = await another();
      assertEquals(await other.pins.get("files", "tool", "read_file"), first);
      const late = changed(first, "Reads any file");
      assertEquals(await other.pins.put(late, null), false);
      assertEquals(await store.pins.get("files", "tool", "read_file"), first);
      assertEquals(await other.pins.list(), [first]);
    },
  },
  {
    name: "pins: a put with the pin as read replaces it; one with a stale pin loses",
    async run({ store, another }) {
      const first = pin("files", "tool", "read_file");
      await store.pins.put(first, null);
      const other = await another();
      const read = await other.pins.get("files", "tool", "read_file");
      assert(read, "the pin is seen on another handle");
      const second = changed(read, "Reads any file");
      assertEquals(await other.pins.put(second, read), true);
      assertEquals(await store.pins.get("files", "tool", "read_file"), second);
      // `first` is stale now.
      assertEquals(await store.pins.put(changed(first, "Deletes a file"), first), false);
      assertEquals(await other.pins.get("files", "tool", "read_file"), second);
      // Equal as JSON is equal, whatever the order of the keys.
      const third = { ...second, status: "pinned" as const, pinned: second.pending, pending: null };
      assertEquals(await store.pins.put(third, reordered(second)), true);
      assertEquals(await other.pins.get("files", "tool", "read_file"), third);
      // A previous pin where none is stored loses too.
      const absent = pin("files", "prompt", "summarize");
      assertEquals(await store.pins.put(absent, absent), false);
      assertEquals(await store.pins.get("files", "prompt", "summarize"), null);
    },
  },
  {
    name: "pins: of two writers that read the same pin, one wins",
    async run({ store, another }) {
      const first = pin("files", "tool", "read_file");
      await store.pins.put(first, null);
      const other = await another();
      const a = changed(first, "Reads any file");
      const b = changed(first, "Deletes a file");
      const won = await Promise.all([store.pins.put(a, first), other.pins.put(b, first)]);
      assertEquals(won.filter(Boolean).length, 1, `exactly one wins: ${won}`);
      assertEquals(await other.pins.get("files", "tool", "read_file"), won[0] ? a : b);
    },
  },
  {
    name: "pins: listed by plugin, kind, then name, on another handle",
    async run({ store, another }) {
      assertEquals(await store.pins.list(), []);
      const pins = [
        pin("gh-x", "prompt", "triage"),
        pin("gh", "tool", "search"),
        pin("gh", "resource_template", "repo://{owner}/{name}"),
        pin("files", "tool", "read_file"),
        pin("gh", "tool", "Zeta"),
        pin("gh", "prompt", "review"),
        pin("files", "tool", "list"),
        pin("gh", "tool", "alpha"),
      ];
      for (const record of pins) assertEquals(await store.pins.put(record, null), true);
      const other = await another();
      assertEquals(await other.pins.list(), [
        pin("files", "tool", "list"),
        pin("files", "tool", "read_file"),
        pin("gh", "prompt", "review"),
        pin("gh", "resource_template", "repo://{owner}/{name}"),
        pin("gh", "tool", "Zeta"),
        pin("gh", "tool", "alpha"),
        pin("gh", "tool", "search"),
        pin("gh-x", "prompt", "triage"),
      ]);
      assertEquals(await other.pins.get("gh", "prompt", "search"), null);
      assertEquals(await other.pins.get("gh", "tool", "search"), pin("gh", "tool", "search"));
    },
  },
  {
    name: "pins: remove says whether it existed; every put and remove bumps registrations",
    async run({ store, another }) {
      const other = await another();
      const v0 = await other.registrationsVersion();
      const first = pin("files", "tool", "read_file");
      await store.pins.put(first, null);
      const v1 = await other.registrationsVersion();
      assert(v1 > v0, "a put bumps the registrations version");
      const second = changed(first, "Reads any file");
      await other.pins.put(second, first);
      const v2 = await store.registrationsVersion();
      assert(v2 > v1, "a put that replaces bumps the registrations version");
      assertEquals(await store.pins.put(first, first), false);
      assertEquals(await store.pins.put(first, null), false);
      assertEquals(await other.registrationsVersion(), v2, "a put that loses changes nothing");
      assertEquals(await other.pins.remove("files", "tool", "read_file"), true);
      const v3 = await store.registrationsVersion();
      assert(v3 > v2, "a remove bumps the registrations version");
      assertEquals(await store.pins.get("files", "tool", "read_file"), null);
      assertEquals(await store.pins.remove("files", "tool", "read_file"), false);
      assertEquals(await store.pins.list(), []);
    },
  },
  {
    name: "pins: put refuses a record that does not match the schema",
    async run({ store }) {
      const good = pin("files", "tool", "read_file");
      const bad: unknown[] = [
        { ...good, kind: "resource" },
        { ...good, name: "" },
        { ...good, status: "trusted" },
        { ...good, pinned: { ...definition("Reads a file", "a"), hash: "sha256:abc" } },
        { ...good, extra: true },
      ];
      for (const record of bad) {
        await assertRejects(() => store.pins.put(record as ToolPinRecord, null));
      }
      assertEquals(await store.pins.list(), []);
    },
  },
];
