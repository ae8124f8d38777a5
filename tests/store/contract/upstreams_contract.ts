/**
 * Contract: MCP upstreams added at run time and the server states running
 * servers publish. Upstreams list by name, a name is taken once whatever the
 * number of handles adding it, and every change bumps the registrations
 * version; server states list newest first, only while fresh.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type { NewUpstream, ServerStatus, Store } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

function status(serverId: string, updatedAt: string, pid = 4242): ServerStatus {
  return {
    server_id: serverId,
    pid,
    transport: "http",
    started_at: "2026-01-01T00:00:00.000Z",
    updated_at: updatedAt,
    plugins: [{ name: "echo", state: "ready", tools: 2 }, { name: "mcp", nested: { a: [1] } }],
  };
}

/** A new upstream: a stdio command unless a url is given, with every field the CLI sets. */
function upstream(fields: Partial<NewUpstream> & { name: string }): NewUpstream {
  return {
    ...(fields.url === undefined ? { command: "npx" } : {}),
    args: [],
    env: {},
    headers: {},
    include: [],
    exclude: [],
    rename: {},
    prefix: true,
    enabled: true,
    ...fields,
  };
}

async function versionOf(store: Store): Promise<bigint> {
  return await store.registrationsVersion();
}

/** Cases of the upstream registrations and server states. */
export const UPSTREAMS_CONTRACT: readonly ContractCase[] = [
  {
    name:
      "upstreams: add() stores upstreams that list by name from another handle; a name is taken once",
    async run({ store, another }) {
      assertEquals(await store.upstreams.list(), []);
      const before = await versionOf(store);
      const http = await store.upstreams.add(upstream({
        name: "web",
        url: "https://mcp.example.com/mcp",
        headers: { Authorization: "keychain:web.token" },
        rename: { search: "web_search" },
        prefix: false,
        enabled: true,
      }));
      const stdio = await store.upstreams.add(upstream({
        name: "files",
        command: "npx",
        args: ["-y", "server-filesystem", "/tmp"],
        env: { TOKEN: "keychain:files.token", PLAIN: "x" },
        include: ["read_*"],
        exclude: ["read_secret"],
        enabled: false,
      }));
      assert(await versionOf(store) > before, "adding bumps the registrations version");
      assertEquals(http.kind, "mcp");
      assertEquals(http.created_at, http.updated_at);
      assertEquals(http.args, [], "defaults are applied");
      assertEquals(http.include, []);
      assertEquals(stdio.env, { TOKEN: "keychain:files.token", PLAIN: "x" });
      assertEquals(stdio.prefix, true);
      assertEquals(stdio.enabled, false);

      const other = await another();
      assertEquals(await other.upstreams.list(), [stdio, http]);

      const version = await versionOf(store);
      const error = await assertRejects(
        () => other.upstreams.add(upstream({ name: "web", command: "x", enabled: true })),
        GatewayError,
      );
      assertEquals(error.code, "CONFLICT");
      assertEquals(
        error.message,
        "Cannot add plugin web: a plugin of that name exists; remove it first",
      );
      assertEquals(await versionOf(store), version, "a refused add changes nothing");
      assertEquals(await store.upstreams.list(), [stdio, http]);
    },
  },
  {
    name: "upstreams: handles adding one name at once: exactly one succeeds",
    async run({ store, another }) {
      const handles = [store, await another(), await another()];
      const results = await Promise.allSettled(
        handles.flatMap((handle, h) =>
          [0, 1].map((n) =>
            handle.upstreams.add(upstream({
              name: "race",
              command: `cmd${h}${n}`,
              enabled: true,
            }))
          )
        ),
      );
      const won = results.filter((result) => result.status === "fulfilled");
      assertEquals(won.length, 1);
      for (const result of results) {
        if (result.status === "rejected") assertEquals(result.reason.code, "CONFLICT");
      }
      const listed = await store.upstreams.list();
      assertEquals(listed.length, 1);
      assertEquals(listed[0], won[0].value);
    },
  },
  {
    name:
      "upstreams: setEnabled() and remove() change one upstream and bump the version; a missing one is null/false",
    async run({ store, another }) {
      const added = await store.upstreams.add(upstream({
        name: "files",
        command: "npx",
        enabled: true,
      }));
      const kept = await store.upstreams.add(upstream({
        name: "kept",
        command: "npx",
        enabled: true,
      }));
      const other = await another();
      let version = await versionOf(other);

      const disabled = await other.upstreams.setEnabled("files", false);
      assert(disabled);
      assertEquals({ ...disabled, updated_at: added.updated_at }, { ...added, enabled: false });
      assert(disabled.updated_at >= added.updated_at);
      assert(await versionOf(store) > version, "setEnabled bumps the version");
      version = await versionOf(store);
      assertEquals(await store.upstreams.list(), [disabled, kept]);

      // Enabling an enabled upstream still touches it (running servers restart it).
      const enabled = await store.upstreams.setEnabled("files", true);
      assert(enabled);
      assertEquals(enabled.enabled, true);
      assert(enabled.updated_at >= disabled.updated_at);
      const again = await store.upstreams.setEnabled("files", true);
      assert(again && again.enabled);
      assert(await versionOf(store) > version);

      version = await versionOf(store);
      assertEquals(await other.upstreams.setEnabled("missing", true), null);
      assertEquals(await other.upstreams.remove("missing"), false);
      assertEquals(await versionOf(store), version, "nothing to change changes nothing");

      assertEquals(await other.upstreams.remove("files"), true);
      assert(await versionOf(store) > version, "remove bumps the version");
      assertEquals(await store.upstreams.remove("files"), false);
      assertEquals(await store.upstreams.list(), [kept]);
      assertEquals(await store.upstreams.setEnabled("files", true), null);
    },
  },
  {
    name: "upstreams: server states list newest first while fresh, and are withdrawn by id",
    async run({ store, another, adapter }) {
      const now = Date.parse("2026-01-01T00:10:00.000Z");
      const other = await another();
      assertEquals(await store.upstreams.listServerStatuses(60_000, now), []);
      const older = status("srv_a", "2026-01-01T00:09:30.000Z", 1);
      const newer = status("srv_b", "2026-01-01T00:09:50.000Z", 2);
      const stale = status("srv_c", "2026-01-01T00:08:00.000Z", 3);
      await store.upstreams.putServerStatus(older, 60_000);
      await other.upstreams.putServerStatus(newer, 60_000);
      await other.upstreams.putServerStatus(stale, 60_000);
      assertEquals(await store.upstreams.listServerStatuses(60_000, now), [newer, older]);
      assertEquals(await other.upstreams.listServerStatuses(15_000, now), [newer]);
      assertEquals(await other.upstreams.listServerStatuses(10 * 60_000, now), [
        newer,
        older,
        stale,
      ]);

      // Publishing again replaces a server's state.
      const refreshed = { ...older, updated_at: "2026-01-01T00:09:59.000Z", plugins: [] };
      await other.upstreams.putServerStatus(refreshed, 60_000);
      assertEquals(await store.upstreams.listServerStatuses(60_000, now), [refreshed, newer]);

      await store.upstreams.deleteServerStatus("srv_b");
      await store.upstreams.deleteServerStatus("srv_missing");
      assertEquals(await other.upstreams.listServerStatuses(60_000, now), [refreshed]);

      // An expired state is not listed (KV deletes expired entries lazily, so it is
      // filtered by age there; PostgreSQL hides it from the moment it expires).
      if (adapter === "postgres") {
        await store.upstreams.putServerStatus(status("srv_d", new Date().toISOString()), 1);
        await new Promise((resolve) => setTimeout(resolve, 5));
        const listed = await store.upstreams.listServerStatuses(60_000);
        assert(!listed.some((s) => s.server_id === "srv_d"), "an expired state is hidden");
      }
    },
  },
];
