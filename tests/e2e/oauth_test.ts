/**
 * OAuth end to end: the real server with `auth.oauth` in its config.json, an
 * issuer on loopback (keys made here with jose), the challenge an MCP client
 * follows over real HTTP, and the official MCP client with an access token.
 *
 * @module
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";

const AUDIENCE = "https://toolgate.example.com/mcp";

Deno.test("e2e: an MCP client follows the 401 challenge to the issuer, then calls with its access token within its scopes, audited as the oauth caller", async () => {
  const keys = await generateKeyPair("ES256");
  const jwk = { ...await exportJWK(keys.publicKey), kid: "k1", alg: "ES256", use: "sig" };
  let issuer = "";
  const as = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const path = new URL(request.url).pathname;
    if (path === "/.well-known/oauth-authorization-server") {
      return Response.json({
        issuer,
        jwks_uri: `${issuer}/jwks`,
        token_endpoint: `${issuer}/token`,
      });
    }
    if (path === "/jwks") return Response.json({ keys: [jwk] });
    return new Response("not found", { status: 404 });
  });
  issuer = `http://127.0.0.1:${as.addr.port}`;
  try {
    await using tmp = await tempHome();
    const admin = "e2e-admin-token";
    await using server = await startHttpServer({
      home: tmp.home,
      env: { TOOLGATE_API_TOKEN: admin },
      config: {
        auth: {
          oauth: { issuer, audience: AUDIENCE, scopes: { "tools:memory": ["memory_*"] } },
        },
      },
    });
    const { url } = server;

    // 1. No token: 401 naming the protected-resource metadata.
    const first = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
    });
    assertEquals(first.status, 401);
    await first.body?.cancel();
    const challenge = first.headers.get("www-authenticate") ?? "";
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
    assertEquals(
      metadataUrl,
      "https://toolgate.example.com/.well-known/oauth-protected-resource/mcp",
    );
    // 2. The metadata (served here under the audience's path), then 3. the issuer's.
    const metadata = await (await fetch(`${url}${new URL(metadataUrl!).pathname}`)).json();
    assertEquals(metadata.resource, AUDIENCE);
    assertEquals(metadata.authorization_servers, [issuer]);
    const asMetadata = await (await fetch(
      `${metadata.authorization_servers[0]}/.well-known/oauth-authorization-server`,
    )).json();
    assertEquals(asMetadata.token_endpoint, `${issuer}/token`);

    // The official client without a token cannot connect.
    const anonymous = new Client({ name: "anonymous", version: "1.0.0" });
    await assertRejects(() =>
      anonymous.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))
    );

    // 4. With a token from the issuer: the tools of its scope, nothing else.
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ scope: "tools:memory", client_id: "desktop" })
      .setProtectedHeader({ alg: "ES256", kid: "k1", typ: "at+jwt" })
      .setIssuer(issuer).setAudience(AUDIENCE).setSubject("alice")
      .setIssuedAt(now).setExpirationTime(now + 600)
      .sign(keys.privateKey);
    const client = new Client({ name: "desktop", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    try {
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      assert(names.length > 0 && names.every((name) => name.startsWith("memory_")), names.join());
      const set = await client.callTool({ name: "memory_set", arguments: { key: "k", value: 1 } });
      assertEquals(set.isError ?? false, false);
      const refused = await client.callTool({
        name: "http_request",
        arguments: { url: "https://example.com" },
      });
      assertEquals(refused.isError, true);
      assertStringIncludes(JSON.stringify(refused.content), "FORBIDDEN");
    } finally {
      await client.close();
    }

    const audit = await fetch(`${url}/audit?caller=desktop`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    const entries = (await audit.json()).entries as {
      tool: string;
      caller: unknown;
      outcome: { error_code?: string };
    }[];
    assertEquals(entries.map((e) => [e.tool, e.outcome.error_code ?? "ok", e.caller]), [
      ["memory_set", "ok", { kind: "oauth", name: "desktop", id: "alice" }],
      ["http_request", "FORBIDDEN", { kind: "oauth", name: "desktop", id: "alice" }],
    ]);
  } finally {
    await as.shutdown();
  }
});
