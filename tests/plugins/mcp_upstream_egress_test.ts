/**
 * HTTP MCP upstreams and the egress policy (profile `operator`): loopback
 * upstreams work, metadata addresses and toolgate's own address never do.
 *
 * @module
 */
import { assertEquals, assertMatch } from "../_asserts.ts";
import { EgressPolicy } from "../../src/egress/mod.ts";
import type { UpstreamSettings, UpstreamSpec } from "../../src/plugins/mcp/upstream_spec.ts";
import { mcpUpstreamPlugin } from "../../src/plugins/mcp/upstream_plugin.ts";
import { pluginGateway } from "./_gateway.ts";
import { startHttpFixture } from "./_upstreams.ts";

const SETTINGS: UpstreamSettings = {
  connectTimeoutMs: 5_000,
  restartInitialMs: 60_000,
  restartMaxMs: 60_000,
  inheritedEnv: {},
};

function spec(url: string): UpstreamSpec {
  return { name: "remote", source: "cli", url, args: [], env: {}, headers: {}, enabled: true };
}

Deno.test("an HTTP upstream on 127.0.0.1 connects under the operator profile without any allowance", async () => {
  await using fixture = await startHttpFixture();
  await using gw = await pluginGateway([
    mcpUpstreamPlugin(spec(fixture.url), { settings: SETTINGS, egress: new EgressPolicy() }),
  ]);
  const [status] = gw.gateway.listPlugins();
  assertEquals(status.state, "ready");
});

Deno.test("an HTTP upstream on a metadata address or on toolgate's own address is refused", async () => {
  await using fixture = await startHttpFixture();
  const own = new EgressPolicy();
  own.listen({ hostname: "0.0.0.0", port: Number(new URL(fixture.url).port) });
  for (
    const [url, egress, pattern] of [
      ["http://169.254.169.254/mcp", new EgressPolicy(), /a cloud metadata address/],
      ["http://[fd00:ec2::254]/mcp", new EgressPolicy(), /a cloud metadata address/],
      [fixture.url, own, /toolgate's own listening address/],
    ] as const
  ) {
    await using gw = await pluginGateway([
      mcpUpstreamPlugin(spec(url), { settings: SETTINGS, egress }),
    ]);
    const [status] = gw.gateway.listPlugins();
    assertEquals(status.state, "error", url);
    assertMatch(status.error ?? "", pattern);
  }
});
