/**
 * Contract: virtual servers. One added on one handle is listed and found on
 * another; names are unique; update changes tools and description; remove
 * deletes; every change bumps the registrations version.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type { VirtualServerRecord } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

function record(name: string, tools: string[]): VirtualServerRecord {
  return {
    name,
    tools,
    description: null,
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
  };
}

/** Cases of the virtual servers. */
export const VIRTUAL_SERVERS_CONTRACT: readonly ContractCase[] = [
  {
    name: "virtual servers: added on one handle, listed by name and found on another; unique names",
    async run({ store, another }) {
      assertEquals(await store.servers.list(), []);
      const b = { ...record("team-b", ["http_request"]), description: "CI jobs" };
      const a = record("team-a", ["memory_*", "github__*"]);
      assertEquals(await store.servers.add(b), b);
      await store.servers.add(a);
      const other = await another();
      assertEquals(await other.servers.list(), [a, b]);
      assertEquals(await other.servers.get("team-b"), b);
      assertEquals(await other.servers.get("nobody"), null);
      const error = await assertRejects(
        () => other.servers.add(record("team-a", ["*"])),
        GatewayError,
      );
      assertEquals(error.code, "CONFLICT");
      assertEquals((await store.servers.get("team-a"))?.tools, ["memory_*", "github__*"]);
    },
  },
  {
    name: "virtual servers: update and remove are seen by another handle; each bumps registrations",
    async run({ store, another }) {
      const other = await another();
      const v0 = await other.registrationsVersion();
      await store.servers.add(record("team-a", ["memory_*"]));
      const v1 = await other.registrationsVersion();
      assert(v1 > v0, "add bumps the registrations version");
      const updated = await store.servers.update("team-a", {
        tools: ["memory_get", "http_request"],
        description: "agents",
      });
      assertEquals(updated?.tools, ["memory_get", "http_request"]);
      assertEquals(updated?.description, "agents");
      assertEquals(await other.servers.get("team-a"), updated);
      const v2 = await other.registrationsVersion();
      assert(v2 > v1, "update bumps the registrations version");
      const cleared = await other.servers.update("team-a", { description: null });
      assertEquals(cleared?.description, null);
      assertEquals(cleared?.tools, ["memory_get", "http_request"]);
      assertEquals(await store.servers.update("nobody", { tools: ["*"] }), null);
      assertEquals(await other.servers.remove("team-a"), true);
      assert(await store.registrationsVersion() > v2, "remove bumps the registrations version");
      assertEquals(await store.servers.get("team-a"), null);
      assertEquals(await store.servers.remove("team-a"), false);
      assertEquals(await store.servers.list(), []);
    },
  },
];
