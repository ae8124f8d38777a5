/**
 * Contract: the dead-letter streak of outgoing webhooks, which disables an
 * endpoint whose last events all went to the DLQ. Each dead letter adds one,
 * a delivery resets it, enabling the webhook again resets it, concurrent
 * handles lose no count, and removing the webhook forgets it.
 *
 * @module
 */
import { assertEquals } from "../../_asserts.ts";
import type { ContractCase } from "./_contract.ts";

/** Cases of `recordOutcome` and its reset by `updateOutgoing`. */
export const OUTCOMES_CONTRACT: readonly ContractCase[] = [
  {
    name: "outcomes: dead letters count up, a delivery and enabling the webhook reset the streak",
    async run({ store }) {
      const hook = await store.webhooks.addOutgoing({ url: "https://example.com/h", events: "*" });
      assertEquals(await store.webhooks.recordOutcome(hook.id, "delivered"), 0);
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 1);
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 2);
      assertEquals(await store.webhooks.recordOutcome(hook.id, "delivered"), 0);
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 1);
      await store.webhooks.updateOutgoing(hook.id, {
        disabled: { at: new Date().toISOString(), reason: "failing", detail: "5 in a row" },
      });
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 2);
      await store.webhooks.updateOutgoing(hook.id, { description: "still disabled" });
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 3);
      const enabled = await store.webhooks.updateOutgoing(hook.id, { disabled: null });
      assertEquals(enabled?.disabled, undefined);
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 1);
    },
  },
  {
    name: "outcomes: dead letters from several handles at once are all counted",
    async run({ store, another }) {
      const other = await another();
      const hook = await store.webhooks.addOutgoing({ url: "https://example.com/h", events: "*" });
      await Promise.all(
        Array.from(
          { length: 20 },
          (_, i) => (i % 2 ? store : other).webhooks.recordOutcome(hook.id, "dead_lettered"),
        ),
      );
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 21);
    },
  },
  {
    name: "outcomes: a removed webhook's streak is gone with it; an unknown id counts nothing",
    async run({ store }) {
      const hook = await store.webhooks.addOutgoing({ url: "https://example.com/h", events: "*" });
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 1);
      assertEquals(await store.webhooks.remove(hook.id), "outgoing");
      assertEquals(await store.webhooks.recordOutcome(hook.id, "dead_lettered"), 0);
      assertEquals(await store.webhooks.recordOutcome("wh_0unknown", "dead_lettered"), 0);
      assertEquals(await store.webhooks.recordOutcome("wh_0unknown", "delivered"), 0);
    },
  },
];
