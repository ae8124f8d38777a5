/**
 * ToolPins on a real KV store: first sight, change, revert, approval and
 * rejection under `tofu` and `approve`, what a refused caller is told, the
 * audit entries, and two instances pinning the same tool at once. Cases are
 * also generated: random sequences of offers and decisions against a model.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import type { PinSubject } from "../../src/gateway/mod.ts";
import { pinHash, pinnedDefinition, ToolPins } from "../../src/pins/mod.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import { tempStore } from "../audit/_store.ts";
import { prng } from "../_prng.ts";

function echo(description: string, extra: Record<string, unknown> = {}): PinSubject {
  return {
    kind: "tool",
    name: "echo",
    exposed: "fix__echo",
    listing: {
      name: "echo",
      description,
      inputSchema: { type: "object", properties: { text: { type: "string" } } },
      icons: [{ src: "https://example.com/i.png" }],
      ...extra,
    },
  };
}

Deno.test("pinnedDefinition keeps what a model reads; the hash ignores key order and icons", () => {
  const a = pinnedDefinition("tool", echo("x").listing);
  assertEquals(Object.keys(a), ["name", "description", "inputSchema"]);
  const reordered = pinnedDefinition("tool", {
    inputSchema: { properties: { text: { type: "string" } }, type: "object" },
    description: "x",
    name: "echo",
  });
  assertEquals(pinHash(a), pinHash(reordered));
  assert(pinHash(a) !== pinHash(pinnedDefinition("tool", echo("y").listing)));
  assertEquals(
    Object.keys(pinnedDefinition("prompt", { name: "p", arguments: [], icons: [] })),
    ["name", "arguments"],
  );
});

Deno.test("tofu: pinned at first sight, quarantined when changed, listed again when approved or undone", async () => {
  await using tmp = await tempStore();
  const audit = createAuditLog({ store: tmp.store });
  const pins = new ToolPins({ store: tmp.store, audit: (input) => audit.append(input) });
  let changes = 0;
  pins.onChange(() => void changes++);
  assertEquals((await pins.admit("fix", [echo("Echoes")])).size, 0);
  assertEquals((await pins.admit("fix", [echo("Echoes")])).size, 0, "the same again: nothing new");

  const held = await pins.admit("fix", [echo("Echoes, and more", { annotations: { x: 1 } })]);
  const error = held.get("fix__echo")!;
  assert(error instanceof GatewayError);
  assertEquals(error.code, "TOOL_QUARANTINED");
  assertEquals(error.status, 409);
  assertStringIncludes(error.message, "changed description, annotations since it was pinned");
  assertEquals((error.details as { changed: string[] }).changed, ["description", "annotations"]);
  const [view] = await pins.list({ changed: true });
  assertEquals([view.tool, view.status], ["fix__echo", "changed"]);
  const diff = await pins.diff("fix__echo");
  assertStringIncludes(diff.diff, '-  "description": "Echoes",');
  assertStringIncludes(diff.diff, '+  "description": "Echoes, and more",');

  // Undone by the upstream: listed as pinned, nothing waits.
  assertEquals((await pins.admit("fix", [echo("Echoes")])).size, 0);
  assertEquals(await pins.list({ changed: true }), []);
  await assertRejects(() => pins.approve("fix__echo", "admin"), GatewayError, "nothing to approve");

  await pins.admit("fix", [echo("Echoes v2")]);
  const [approved] = await pins.approve("fix__echo", "admin");
  assertEquals([approved.status, approved.decided_by], ["pinned", "admin"]);
  assertEquals(changes, 1);
  assertEquals((await pins.admit("fix", [echo("Echoes v2")])).size, 0);
  // The old definition is now a change too.
  assert((await pins.admit("fix", [echo("Echoes")])).has("fix__echo"));
  await pins.reject("fix__echo", "key:k1");
  const rejected = (await pins.admit("fix", [echo("Echoes")])).get("fix__echo")!;
  assertStringIncludes(rejected.message, "was rejected by key:k1");
  await assertRejects(() => pins.diff("nope"), GatewayError, "No pin named");

  const kinds = [];
  for await (const entry of audit.entries()) kinds.push(`${entry.kind} ${entry.outcome.status}`);
  assertEquals(kinds, [
    "pin.created pinned",
    "pin.changed changed",
    "pin.changed changed",
    "pin.approved pinned",
    "pin.changed changed",
    "pin.rejected rejected",
  ]);
  await audit.close();
});

Deno.test("approve: a new tool is held until approved; --all approves every one waiting", async () => {
  await using tmp = await tempStore();
  const pins = new ToolPins({ store: tmp.store, mode: "approve" });
  const other: PinSubject = { ...echo("Adds"), name: "add", exposed: "fix__add" };
  const held = await pins.admit("fix", [echo("Echoes"), other]);
  assertEquals([...held.keys()], ["fix__echo", "fix__add"]);
  assertStringIncludes(held.get("fix__echo")!.message, "is new and held until an administrator");
  const approved = await pins.approve("*", "admin");
  assertEquals(approved.map((pin) => pin.tool), ["fix__add", "fix__echo"]);
  assertEquals((await pins.admit("fix", [echo("Echoes"), other])).size, 0);
});

Deno.test("two instances seeing a new tool at once keep one pin and one entry", async () => {
  await using tmp = await tempStore();
  const second = await openKvStore({ dataDir: tmp.dataDir });
  try {
    const audit = createAuditLog({ store: tmp.store });
    const a = new ToolPins({ store: tmp.store, audit: (input) => audit.append(input) });
    const b = new ToolPins({ store: second, audit: (input) => audit.append(input) });
    const [heldA, heldB] = await Promise.all([
      a.admit("fix", [echo("Echoes")]),
      b.admit("fix", [echo("Echoes")]),
    ]);
    assertEquals([heldA.size, heldB.size], [0, 0]);
    assertEquals((await a.list()).length, 1);
    let created = 0;
    for await (const entry of audit.entries()) if (entry.kind === "pin.created") created++;
    assertEquals(created, 1);
    await audit.close();
  } finally {
    second.close();
  }
});

Deno.test("generated offers and decisions keep the pins as a model says", async () => {
  await using tmp = await tempStore();
  const random = prng(36);
  for (const mode of ["tofu", "approve"] as const) {
    const plugin = `p_${mode}`;
    const pins = new ToolPins({ store: tmp.store, mode });
    // The model: per tool, the trusted description (or none), what waits, and whether rejected.
    const model = new Map<string, { pinned?: string; pending?: string; rejected?: boolean }>();
    for (let step = 0; step < 300; step++) {
      const tool = `t${Math.floor(random() * 3)}`;
      const subject: PinSubject = {
        kind: "tool",
        name: tool,
        exposed: `${plugin}__${tool}`,
        listing: { name: tool, description: `v${Math.floor(random() * 3)}` },
      };
      const state = model.get(tool) ?? {};
      const action = random();
      if (action < 0.6) {
        const offered = subject.listing.description as string;
        const held = (await pins.admit(plugin, [subject])).has(subject.exposed);
        if (state.pinned === undefined && state.pending === undefined) {
          if (mode === "tofu") state.pinned = offered;
          else state.pending = offered;
        } else if (state.pinned === offered) {
          state.pending = undefined;
          state.rejected = false;
        } else if (state.pending !== offered) {
          state.pending = offered;
          state.rejected = false;
        }
        model.set(tool, state);
        assertEquals(held, state.pinned !== offered, `step ${step}: ${tool} ${offered}`);
      } else if (model.has(tool)) {
        const decide = action < 0.8 ? "approve" : "reject";
        const run = () =>
          decide === "approve"
            ? pins.approve(subject.exposed, "admin")
            : pins.reject(subject.exposed, "admin");
        // Nothing waiting: nothing to decide (a rejected change may still be approved).
        if (state.pending === undefined) {
          await assertRejects(run, GatewayError, "has no changed definition waiting");
          continue;
        }
        await run();
        if (decide === "approve") {
          state.pinned = state.pending;
          state.pending = undefined;
          state.rejected = false;
        } else {
          state.rejected = true;
        }
      }
    }
    for (const view of await pins.list()) {
      if (view.plugin !== plugin) continue;
      const state = model.get(view.name)!;
      assertEquals(view.pending_sha256 === null, state.pending === undefined, view.tool);
      assertEquals(view.status === "rejected", state.rejected === true, view.tool);
    }
  }
});

Deno.test("a definition too large to keep is pinned by its hash alone", async () => {
  await using tmp = await tempStore();
  const pins = new ToolPins({ store: tmp.store });
  const huge = "x".repeat(40_000);
  assertEquals((await pins.admit("fix", [echo(huge)])).size, 0);
  const held = await pins.admit("fix", [echo(`${huge}y`)]);
  assertEquals(held.get("fix__echo")?.code, "TOOL_QUARANTINED");
  const diff = await pins.diff("fix__echo");
  assertStringIncludes(diff.diff, "not kept (over 24576)");
  assert(diff.pinned_sha256 !== diff.pending_sha256);
  assertEquals((await pins.admit("fix", [echo(huge)])).size, 0, "the pinned one, by its hash");
});
