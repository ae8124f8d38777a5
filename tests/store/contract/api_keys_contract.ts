/**
 * Contract: API keys. A key added on one handle is found on another by id,
 * name and hash; names and hashes are unique; list is oldest first; touch
 * records the last use; remove revokes on every handle; adding and removing
 * move the registrations version (running servers re-read whether a key
 * exists), a refused add or a touch does not.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import { ulid } from "../../../src/ids.ts";
import type { ApiKeyRecord } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

function record(name: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  const hex = [...crypto.getRandomValues(new Uint8Array(32))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  return {
    id: `key_${ulid()}`,
    name,
    prefix: "tg_abcdef",
    hash: hex,
    tools: null,
    server: null,
    rate: null,
    expires_at: null,
    created_at: "2026-01-01T00:00:00.000Z",
    last_used_at: null,
    ...overrides,
  };
}

/** Cases of the API keys. */
export const API_KEYS_CONTRACT: readonly ContractCase[] = [
  {
    name:
      "api keys: added on one handle, found on another by id, name and hash; listed oldest first",
    async run({ store, another }) {
      assertEquals(await store.apiKeys.list(), []);
      assertEquals(await store.apiKeys.any(), false);
      const ci = record("ci", {
        tools: ["memory_*", "http_request"],
        server: "team-a",
        rate: "10/s",
        expires_at: "2027-01-01T00:00:00.000Z",
      });
      const agent = record("agent");
      assertEquals(await store.apiKeys.add(ci), ci);
      await store.apiKeys.add(agent);
      const other = await another();
      assertEquals(await other.apiKeys.any(), true);
      assertEquals(await other.apiKeys.get(ci.id), ci);
      assertEquals(await other.apiKeys.getByName("agent"), agent);
      assertEquals(await other.apiKeys.findByHash(ci.hash), ci);
      assertEquals(await other.apiKeys.findByHash("0".repeat(64)), null);
      assertEquals(await other.apiKeys.get("key_NONE"), null);
      assertEquals(await other.apiKeys.getByName("nobody"), null);
      assertEquals((await other.apiKeys.list()).map((k) => k.name), ["ci", "agent"]);
    },
  },
  {
    name: "api keys: a taken name or hash is CONFLICT and nothing is stored",
    async run({ store }) {
      const ci = await store.apiKeys.add(record("ci"));
      const error = await assertRejects(() => store.apiKeys.add(record("ci")), GatewayError);
      assertEquals(error.code, "CONFLICT");
      const sameHash = await assertRejects(
        () => store.apiKeys.add(record("other", { hash: ci.hash })),
        GatewayError,
      );
      assertEquals(sameHash.code, "CONFLICT");
      assertEquals((await store.apiKeys.list()).map((k) => k.id), [ci.id]);
      assertEquals(await store.apiKeys.getByName("other"), null);
    },
  },
  {
    name: "api keys: touch records the last use; remove revokes on every handle and frees the name",
    async run({ store, another }) {
      const ci = await store.apiKeys.add(record("ci"));
      const other = await another();
      await other.apiKeys.touch(ci.id, "2026-02-02T00:00:00.000Z");
      assertEquals((await store.apiKeys.get(ci.id))?.last_used_at, "2026-02-02T00:00:00.000Z");
      await other.apiKeys.touch("key_GONE", "2026-02-02T00:00:00.000Z");
      assertEquals(await other.apiKeys.remove(ci.id), true);
      assertEquals(await store.apiKeys.remove(ci.id), false);
      assertEquals(await store.apiKeys.get(ci.id), null);
      assertEquals(await store.apiKeys.findByHash(ci.hash), null);
      assertEquals(await store.apiKeys.getByName("ci"), null);
      assertEquals(await store.apiKeys.any(), false);
      const again = await store.apiKeys.add(record("ci"));
      assert(again.id !== ci.id);
      assertEquals((await other.apiKeys.getByName("ci"))?.id, again.id);
    },
  },
  {
    name:
      "api keys: adding and removing move the registrations version; a refused add, a touch do not",
    async run({ store, another }) {
      const other = await another();
      const start = await other.registrationsVersion();
      const ci = await store.apiKeys.add(record("ci"));
      const added = await other.registrationsVersion();
      assert(added > start, `${added} > ${start}`);
      await assertRejects(() => store.apiKeys.add(record("ci")), GatewayError);
      await store.apiKeys.touch(ci.id, "2026-02-02T00:00:00.000Z");
      assertEquals(await other.registrationsVersion(), added);
      assertEquals(await store.apiKeys.remove("key_GONE"), false);
      assertEquals(await other.registrationsVersion(), added);
      assertEquals(await store.apiKeys.remove(ci.id), true);
      assert(await other.registrationsVersion() > added);
    },
  },
];
