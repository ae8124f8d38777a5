/**
 * Contract: webhook registrations. Outgoing webhooks and incoming endpoints
 * list oldest first and read back as they were added; an incoming name and
 * path are each taken once, whatever the number of handles registering them;
 * an endpoint's counters count every increment; every registration change
 * bumps the registrations version.
 *
 * @module
 */
import { assert, assertEquals, assertMatch, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type { IncomingWebhook, OutgoingWebhook } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

/** Records in id order: ids are time-ordered, so that is oldest first. */
function byId<T extends { id: string }>(records: readonly T[]): T[] {
  return [...records].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

async function conflictOf(promise: Promise<unknown>): Promise<GatewayError> {
  const error = await assertRejects(() => promise, GatewayError);
  assertEquals(error.code, "CONFLICT");
  return error;
}

/** Cases of the webhook registrations. */
export const WEBHOOKS_CONTRACT: readonly ContractCase[] = [
  {
    name: "webhooks: added outgoing webhooks list oldest first and read back from another handle",
    async run({ store, another }) {
      assertEquals(await store.webhooks.listOutgoing(), []);
      const added: OutgoingWebhook[] = [];
      added.push(
        await store.webhooks.addOutgoing({ url: "https://example.com/a", events: "*" }),
        await store.webhooks.addOutgoing({
          url: "http://127.0.0.1:9/b",
          events: ["tool.called", "tool.failed"],
          secret: "whsec_c2VjcmV0",
        }),
        await store.webhooks.addOutgoing({ url: "https://example.com/c", events: "*", secret: "" }),
      );
      for (const webhook of added) assertMatch(webhook.id, /^wh_[0-9a-z]+$/);
      assertEquals(added[0], {
        id: added[0].id,
        url: "https://example.com/a",
        events: "*",
        created_at: added[0].created_at,
      });
      assertEquals(added[1].secret, "whsec_c2VjcmV0");
      assert(!("secret" in added[2]), "an empty secret is no secret");
      assert(!Number.isNaN(Date.parse(added[0].created_at)));

      const other = await another();
      assertEquals(await other.webhooks.listOutgoing(), byId(added));
      for (const webhook of added) {
        assertEquals(await other.webhooks.getOutgoing(webhook.id), webhook);
      }
      assertEquals(await other.webhooks.getOutgoing("wh_missing"), null);
      assertEquals(await other.webhooks.getOutgoing(""), null);
      // The kinds are apart.
      assertEquals(await other.webhooks.listIncoming(), []);
      assertEquals(await other.webhooks.getIncoming(added[0].id), null);
    },
  },
  {
    name:
      "webhooks: added incoming endpoints list oldest first and read back as added returned them",
    async run({ store, another }) {
      assertEquals(await store.webhooks.listIncoming(), []);
      const added: IncomingWebhook[] = [];
      added.push(
        await store.webhooks.addIncoming({
          name: "github",
          path: "/hooks/github",
          handler: "echo",
        }),
        await store.webhooks.addIncoming({
          name: "stripe",
          path: "/hooks/stripe",
          handler: "http_request",
          secret: "whsec_abc",
          signature_header: "Stripe-Signature",
          verify: "stripe",
          tolerance_s: 600,
          rate_limit_per_s: 2.5,
        }),
        // Options left undefined read back as the returned record has them.
        await store.webhooks.addIncoming({
          name: "plain",
          path: "/plain",
          handler: "echo",
          secret: undefined,
          rate_limit_per_s: undefined,
        }),
      );
      for (const endpoint of added) assertMatch(endpoint.id, /^in_[0-9a-z]+$/);
      assertEquals(added[1], {
        id: added[1].id,
        name: "stripe",
        path: "/hooks/stripe",
        handler: "http_request",
        secret: "whsec_abc",
        signature_header: "Stripe-Signature",
        verify: "stripe",
        tolerance_s: 600,
        rate_limit_per_s: 2.5,
        created_at: added[1].created_at,
      });
      assertEquals(added[2].secret, undefined);

      const other = await another();
      assertEquals(await other.webhooks.listIncoming(), byId(added));
      for (const endpoint of added) {
        assertEquals(await other.webhooks.getIncoming(endpoint.id), endpoint);
      }
      assertEquals(await other.webhooks.getIncoming("in_missing"), null);
      assertEquals(await other.webhooks.listOutgoing(), []);
      assertEquals(await other.webhooks.getOutgoing(added[0].id), null);
    },
  },
  {
    name:
      "webhooks: an incoming name or path is taken once: CONFLICT names the endpoint holding it",
    async run({ store, another }) {
      const first = await store.webhooks.addIncoming({
        name: "github",
        path: "/hooks/github",
        handler: "echo",
      });
      const other = await another();
      const version = await store.registrationsVersion();
      const byPath = await conflictOf(
        other.webhooks.addIncoming({ name: "other", path: "/hooks/github", handler: "echo" }),
      );
      assertEquals(
        byPath.message,
        `Invalid --url: path /hooks/github is already used by ${first.id}`,
      );
      const byName = await conflictOf(
        other.webhooks.addIncoming({ name: "github", path: "/hooks/other", handler: "echo" }),
      );
      assertEquals(byName.message, `Invalid --name: "github" is already used by ${first.id}`);
      // Both taken: the path is named.
      const both = await conflictOf(
        other.webhooks.addIncoming({ name: "github", path: "/hooks/github", handler: "echo" }),
      );
      assertEquals(both.message, byPath.message);
      assertEquals(await store.webhooks.listIncoming(), [first]);
      assertEquals(await store.registrationsVersion(), version, "a refused add changes nothing");
      // Names and paths are compared exactly.
      await other.webhooks.addIncoming({ name: "GitHub", path: "/hooks/GitHub", handler: "echo" });
      await other.webhooks.addIncoming({
        name: "github ",
        path: "/hooks/github/",
        handler: "echo",
      });
      assertEquals((await store.webhooks.listIncoming()).length, 3);
    },
  },
  {
    name: "webhooks: handles registering one path or name at once: exactly one succeeds",
    async run({ store, another }) {
      const handles = [store, await another(), await another()];
      const samePath = await Promise.allSettled(
        handles.flatMap((handle, h) =>
          [0, 1].map((n) =>
            handle.webhooks.addIncoming({ name: `n${h}${n}`, path: "/race", handler: "echo" })
          )
        ),
      );
      const sameName = await Promise.allSettled(
        handles.flatMap((handle, h) =>
          [0, 1].map((n) =>
            handle.webhooks.addIncoming({ name: "race", path: `/p${h}${n}`, handler: "echo" })
          )
        ),
      );
      for (const results of [samePath, sameName]) {
        const won = results.filter((result) => result.status === "fulfilled");
        assertEquals(won.length, 1, "one registration wins");
        for (const result of results) {
          if (result.status === "fulfilled") continue;
          assert(result.reason instanceof GatewayError, String(result.reason));
          assertEquals(result.reason.code, "CONFLICT");
        }
      }
      const listed = await store.webhooks.listIncoming();
      assertEquals(listed.length, 2);
      assertEquals(listed.filter((endpoint) => endpoint.path === "/race").length, 1);
      assertEquals(listed.filter((endpoint) => endpoint.name === "race").length, 1);
    },
  },
  {
    name: "webhooks: remove() removes either kind, says which, and frees the name, path and stats",
    async run({ store, another }) {
      const outgoing = await store.webhooks.addOutgoing({
        url: "https://example.com/",
        events: "*",
      });
      const kept = await store.webhooks.addOutgoing({ url: "https://example.com/k", events: "*" });
      const incoming = await store.webhooks.addIncoming({
        name: "github",
        path: "/hooks/github",
        handler: "echo",
      });
      await store.webhooks.addIncomingStats(
        incoming.id,
        { received: 3, failed: 1 },
        "2026-01-01T00:00:00.000Z",
      );
      const other = await another();
      assertEquals(await other.webhooks.remove("wh_missing"), null);
      assertEquals(await other.webhooks.remove("in_missing"), null);
      assertEquals(await other.webhooks.remove("xx_1"), null);
      assertEquals(await other.webhooks.remove(""), null);
      assertEquals(await other.webhooks.remove(outgoing.id), "outgoing");
      assertEquals(await other.webhooks.remove(outgoing.id), null);
      assertEquals(await store.webhooks.getOutgoing(outgoing.id), null);
      assertEquals(await store.webhooks.listOutgoing(), [kept]);

      assertEquals(await other.webhooks.remove(incoming.id), "incoming");
      assertEquals(await other.webhooks.remove(incoming.id), null);
      assertEquals(await store.webhooks.getIncoming(incoming.id), null);
      assertEquals(await store.webhooks.listIncoming(), []);
      assertEquals(await store.webhooks.incomingStats(incoming.id), {
        received: 0,
        rejected: 0,
        failed: 0,
      });
      const again = await store.webhooks.addIncoming({
        name: "github",
        path: "/hooks/github",
        handler: "echo",
      });
      assert(again.id !== incoming.id);
      assertEquals(await store.webhooks.incomingStats(again.id), {
        received: 0,
        rejected: 0,
        failed: 0,
      });
    },
  },
  {
    name: "webhooks: incoming stats count every increment, from any number of handles",
    async run({ store, another }) {
      const endpoint = await store.webhooks.addIncoming({
        name: "n",
        path: "/n",
        handler: "echo",
      });
      assertEquals(await store.webhooks.incomingStats(endpoint.id), {
        received: 0,
        rejected: 0,
        failed: 0,
      });
      const handles = [store, await another(), await another()];
      await Promise.all(
        Array.from({ length: 30 }, (_, n) =>
          handles[n % 3].webhooks.addIncomingStats(endpoint.id, {
            received: 1,
            ...(n % 5 === 0 ? { rejected: 2 } : {}),
            ...(n % 10 === 0 ? { failed: 1 } : {}),
          })),
      );
      assertEquals(await handles[1].webhooks.incomingStats(endpoint.id), {
        received: 30,
        rejected: 12,
        failed: 3,
      });
      // The last received time is set when given and kept when not; zero deltas add nothing.
      await store.webhooks.addIncomingStats(
        endpoint.id,
        { received: 1 },
        "2026-01-01T00:00:00.000Z",
      );
      await handles[2].webhooks.addIncomingStats(endpoint.id, { received: 0, rejected: 0 });
      assertEquals(await handles[2].webhooks.incomingStats(endpoint.id), {
        received: 31,
        rejected: 12,
        failed: 3,
        last_received_at: "2026-01-01T00:00:00.000Z",
      });
      await handles[1].webhooks.addIncomingStats(endpoint.id, {}, "2026-01-02T00:00:00.000Z");
      await store.webhooks.addIncomingStats(endpoint.id, { failed: 2 });
      assertEquals(await store.webhooks.incomingStats(endpoint.id), {
        received: 31,
        rejected: 12,
        failed: 5,
        last_received_at: "2026-01-02T00:00:00.000Z",
      });
      // Counters are per endpoint.
      assertEquals(await store.webhooks.incomingStats("in_other"), {
        received: 0,
        rejected: 0,
        failed: 0,
      });
    },
  },
  {
    name:
      "webhooks: every registration change bumps the registrations version, seen by every handle",
    async run({ store, another }) {
      const other = await another();
      let version = await other.registrationsVersion();
      assertEquals(await store.registrationsVersion(), version);
      const bumped = async (what: string) => {
        const now = await other.registrationsVersion();
        assert(now > version, `${what} bumps the version`);
        version = now;
      };
      const unchanged = async (what: string) => {
        assertEquals(await other.registrationsVersion(), version, `${what} changes nothing`);
      };
      const outgoing = await store.webhooks.addOutgoing({
        url: "https://example.com/",
        events: "*",
      });
      await bumped("addOutgoing");
      const incoming = await store.webhooks.addIncoming({ name: "a", path: "/a", handler: "echo" });
      await bumped("addIncoming");
      await assertRejects(() =>
        store.webhooks.addIncoming({ name: "a", path: "/b", handler: "echo" })
      );
      await unchanged("a refused addIncoming");
      await store.webhooks.addIncomingStats(incoming.id, { received: 1 });
      await unchanged("addIncomingStats");
      assertEquals(await store.webhooks.remove(outgoing.id), "outgoing");
      await bumped("removing an outgoing webhook");
      assertEquals(await store.webhooks.remove(incoming.id), "incoming");
      await bumped("removing an incoming endpoint");
      assertEquals(await store.webhooks.remove(incoming.id), null);
      await unchanged("removing nothing");
    },
  },
];
