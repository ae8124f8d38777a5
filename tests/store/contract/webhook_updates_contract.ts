/**
 * Contract: changing an outgoing webhook (`updateOutgoing`). A patch changes
 * the fields it names and nothing else, `null` removes an optional field,
 * `updated_at` moves; the change is seen by every handle and bumps the
 * registrations version; an unknown id or a bad patch changes nothing; and
 * patches of different fields from several handles at once are all kept.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import type { ContractCase } from "./_contract.ts";

/** Cases of outgoing webhook updates. */
export const WEBHOOK_UPDATES_CONTRACT: readonly ContractCase[] = [
  {
    name:
      "webhooks: updateOutgoing() changes the named fields, null removes one, every handle sees it",
    async run({ store, another }) {
      const added = await store.webhooks.addOutgoing({
        url: "https://example.com/a",
        events: "*",
        secret: "whsec_c2VjcmV0LWE=",
        description: "first",
      });
      const other = await another();
      const version = await other.registrationsVersion();
      const disabled = { at: "2026-01-02T03:04:05.000Z", reason: "manual" as const, detail: "why" };
      const previous = [{ secret: "whsec_b2xk", expires_at: "2026-01-03T00:00:00.000Z" }];
      const updated = await other.webhooks.updateOutgoing(added.id, {
        url: "http://127.0.0.1:9/b",
        events: ["tool.failed"],
        secret: "whsec_bmV3",
        previous_secrets: previous,
        disabled,
        retry_schedule_ms: [5000, 300_000],
      });
      assert(updated);
      assert(updated.updated_at && !Number.isNaN(Date.parse(updated.updated_at)));
      assertEquals(updated, {
        id: added.id,
        url: "http://127.0.0.1:9/b",
        events: ["tool.failed"],
        secret: "whsec_bmV3",
        previous_secrets: previous,
        description: "first",
        disabled,
        retry_schedule_ms: [5000, 300_000],
        created_at: added.created_at,
        updated_at: updated.updated_at,
      });
      assert((await store.registrationsVersion()) > version, "an update bumps the version");
      assertEquals(await store.webhooks.getOutgoing(added.id), updated);
      assertEquals(await store.webhooks.listOutgoing(), [updated]);

      const cleared = await store.webhooks.updateOutgoing(added.id, {
        description: null,
        disabled: null,
        previous_secrets: null,
        retry_schedule_ms: null,
        secret: null,
      });
      assertEquals(cleared, {
        id: added.id,
        url: "http://127.0.0.1:9/b",
        events: ["tool.failed"],
        created_at: added.created_at,
        updated_at: cleared?.updated_at,
      });
      assertEquals(await other.webhooks.getOutgoing(added.id), cleared);
      // An empty patch only moves updated_at.
      const touched = await other.webhooks.updateOutgoing(added.id, {});
      assertEquals({ ...touched, updated_at: undefined }, { ...cleared, updated_at: undefined });
    },
  },
  {
    name: "webhooks: updateOutgoing() of an unknown id or with a bad field changes nothing",
    async run({ store, another }) {
      const added = await store.webhooks.addOutgoing({ url: "https://example.com/", events: "*" });
      const other = await another();
      const version = await other.registrationsVersion();
      assertEquals(
        await other.webhooks.updateOutgoing("wh_missing", { url: "https://x.test/" }),
        null,
      );
      await assertRejects(() => other.webhooks.updateOutgoing(added.id, { url: "ftp://x.test/" }));
      await assertRejects(() => other.webhooks.updateOutgoing(added.id, { events: [] }));
      await assertRejects(() =>
        other.webhooks.updateOutgoing(added.id, { retry_schedule_ms: [-1] })
      );
      assertEquals(await store.webhooks.getOutgoing(added.id), added);
      assertEquals(await store.registrationsVersion(), version, "a refused update bumps nothing");
      // Other records and kinds are untouched by an update.
      const second = await store.webhooks.addOutgoing({
        url: "https://example.com/2",
        events: "*",
      });
      await other.webhooks.updateOutgoing(added.id, { description: "only this one" });
      assertEquals(await store.webhooks.getOutgoing(second.id), second);
    },
  },
  {
    name: "webhooks: patches of different fields from several handles at once are all kept",
    async run({ store, another }) {
      const added = await store.webhooks.addOutgoing({ url: "https://example.com/", events: "*" });
      const handles = [store, await another(), await another()];
      const results = await Promise.all([
        handles[0].webhooks.updateOutgoing(added.id, { url: "https://example.com/moved" }),
        handles[1].webhooks.updateOutgoing(added.id, { events: ["tool.called"] }),
        handles[2].webhooks.updateOutgoing(added.id, { description: "noted" }),
        handles[0].webhooks.updateOutgoing(added.id, { secret: "rotated" }),
        handles[1].webhooks.updateOutgoing(added.id, {
          disabled: { at: "2026-01-01T00:00:00.000Z", reason: "gone" },
        }),
      ]);
      for (const result of results) assert(result);
      const final = await handles[2].webhooks.getOutgoing(added.id);
      assertEquals(
        [final?.url, final?.events, final?.description, final?.secret, final?.disabled?.reason],
        ["https://example.com/moved", ["tool.called"], "noted", "rotated", "gone"],
      );
    },
  },
];
