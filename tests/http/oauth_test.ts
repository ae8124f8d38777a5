/**
 * toolgate as an OAuth 2.1 resource server (`auth.oauth`): JWT access tokens
 * from a local issuer on loopback (keys made here with jose, its metadata and
 * JWKS served by Deno.serve), the RFC 9728 metadata, the WWW-Authenticate
 * challenges an MCP client follows, scopes mapped to tools over REST and MCP,
 * every kind of bad token, the JWKS cache and an issuer that is down.
 *
 * @module
 */
import { CompactSign, exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { parseConfigFile } from "../../src/config/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { auditRoutes, consoleRoutes, createApp } from "../../src/http/mod.ts";
import { inheritedEnv, mcpUpstreamPlugin } from "../../src/plugins/mcp/mod.ts";
import { pluginGateway } from "../plugins/_gateway.ts";
import { startHttpFixture } from "../plugins/_upstreams.ts";
import { bearer, httpConfig, mcpClient, postJson, storedApp } from "./_fixtures.ts";

const AUDIENCE = "https://toolgate.example.com/mcp";
const METADATA_URL = "https://toolgate.example.com/.well-known/oauth-protected-resource/mcp";
const ADMIN = "admin-token-0123456789";

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

/** An authorization server on 127.0.0.1: RFC 8414 metadata and a JWKS it can change or take down. */
async function startIssuer() {
  const rsa = await generateKeyPair("RS256", { extractable: true });
  const ec = await generateKeyPair("ES256", { extractable: true });
  const publicJwk = async (pair: KeyPair, kid: string, alg: string): Promise<JWK> => ({
    ...await exportJWK(pair.publicKey),
    kid,
    alg,
    use: "sig",
  });
  const state = {
    keys: [await publicJwk(rsa, "rsa-1", "RS256"), await publicJwk(ec, "ec-1", "ES256")],
    down: false,
    jwksFetches: 0,
    metadataFetches: 0,
  };
  let issuer = "";
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const path = new URL(request.url).pathname;
    if (path === "/.well-known/oauth-authorization-server") {
      state.metadataFetches++;
      return Response.json({
        issuer,
        jwks_uri: `${issuer}/jwks`,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
      });
    }
    if (path === "/jwks") {
      state.jwksFetches++;
      if (state.down) return new Response("down", { status: 503 });
      return Response.json({ keys: state.keys });
    }
    return new Response("not found", { status: 404 });
  });
  issuer = `http://127.0.0.1:${server.addr.port}`;
  return {
    issuer,
    state,
    rsa,
    ec,
    publicJwk,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

type Issuer = Awaited<ReturnType<typeof startIssuer>>;

interface TokenOptions {
  scope?: string;
  aud?: string | string[];
  iss?: string;
  sub?: string;
  client_id?: string;
  /** Seconds from the clock's now. */
  exp?: number;
  nbf?: number;
  kid?: string;
  key?: KeyPair;
  alg?: string;
}

async function setup(
  issuer: Issuer,
  oauth: Record<string, unknown> = {},
  env: Record<string, string> = {},
  more: Record<string, unknown> = {},
) {
  const config = await httpConfig({
    ...more,
    auth: {
      oauth: {
        issuer: issuer.issuer,
        audience: AUDIENCE,
        scopes: { "tools:read": ["echo"], "tools:all": ["*"] },
        ...oauth,
      },
    },
  }, env);
  const clock = { now: Date.now() };
  const t = await storedApp(config, {
    now: () => clock.now,
    routes: (store, audit) => [consoleRoutes({ store, audit }), auditRoutes(audit)],
  });
  /** A token signed by the issuer's RSA key unless told otherwise. */
  const token = (options: TokenOptions = {}) => {
    const now = Math.floor(clock.now / 1000);
    const jwt = new SignJWT({
      ...(options.scope === undefined ? {} : { scope: options.scope }),
      client_id: options.client_id ?? "claude-desktop",
    })
      .setProtectedHeader({
        alg: options.alg ?? "RS256",
        kid: options.kid ?? "rsa-1",
        typ: "at+jwt",
      })
      .setIssuer(options.iss ?? issuer.issuer)
      .setAudience(options.aud ?? AUDIENCE)
      .setSubject(options.sub ?? "user-42")
      .setIssuedAt(now)
      .setExpirationTime(now + (options.exp ?? 300));
    if (options.nbf !== undefined) jwt.setNotBefore(now + options.nbf);
    return jwt.sign((options.key ?? issuer.rsa).privateKey);
  };
  return { ...t, clock, token };
}

/** The auth-params of a `Bearer` challenge. */
function challenge(response: Response): Record<string, string> {
  const header = response.headers.get("www-authenticate") ?? "";
  assert(header.startsWith("Bearer "), header);
  const params: Record<string, string> = {};
  for (const match of header.slice(7).matchAll(/([a-z_]+)="([^"]*)"/g)) params[match[1]] = match[2];
  return params;
}

function base64url(text: string): string {
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

Deno.test("OAuth: the challenge an MCP client follows: 401 → resource_metadata → authorization_servers → the issuer's metadata", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer);
  // An MCP client's first request, without a token.
  const first = await t.app.request("/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
  });
  assertEquals(first.status, 401);
  assertEquals((await first.json()).error.code, "UNAUTHORIZED");
  const params = challenge(first);
  assertEquals(params.resource_metadata, METADATA_URL);
  assertEquals(params.error, undefined, "no error code without a token (RFC 6750 §3.1)");

  // It reads the metadata document the challenge names (no token needed).
  const metadataPath = new URL(params.resource_metadata).pathname;
  assertEquals(metadataPath, "/.well-known/oauth-protected-resource/mcp");
  const metadata = await t.app.request(metadataPath);
  assertEquals(metadata.status, 200);
  assertEquals(metadata.headers.get("content-type"), "application/json");
  const document = await metadata.json();
  assertEquals(document, {
    resource: AUDIENCE,
    authorization_servers: [issuer.issuer],
    scopes_supported: ["tools:read", "tools:all"],
    bearer_methods_supported: ["header"],
  });
  // The root form serves the same document.
  assertEquals(
    await (await t.app.request("/.well-known/oauth-protected-resource")).json(),
    document,
  );

  // Then the authorization server's metadata, where it would get a token.
  const as = await fetch(
    `${document.authorization_servers[0]}/.well-known/oauth-authorization-server`,
  );
  assertEquals((await as.json()).token_endpoint, `${issuer.issuer}/token`);

  // With a token from there, the same request goes through.
  await using session = await mcpClient(t.app, bearer(await t.token({ scope: "tools:all" })));
  assert((await session.client.listTools()).tools.length > 1);
  // The console is not open either (no TOOLGATE_API_TOKEN, no key, but an issuer).
  const console = await t.app.request("/ui");
  assertEquals(console.status, 303);
  assertStringIncludes(console.headers.get("location") ?? "", "/ui/login");
  // The JWKS was found through the issuer's metadata (no jwks_url configured).
  assertEquals(issuer.state.metadataFetches, 2);
  assertEquals(issuer.state.jwksFetches, 1);
});

Deno.test("OAuth: a virtual server's /mcp/<name> is a resource of its own: its metadata and challenge, and tokens for it or for /mcp", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer, {}, {}, { servers: { sales: { tools: ["echo"] } } });
  const SALES = "https://toolgate.example.com/mcp/sales";
  const first = await t.app.request("/mcp/sales", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
  });
  assertEquals(first.status, 401);
  const params = challenge(first);
  assertEquals(
    params.resource_metadata,
    "https://toolgate.example.com/.well-known/oauth-protected-resource/mcp/sales",
  );
  const metadata = await t.app.request(new URL(params.resource_metadata).pathname);
  assertEquals(metadata.status, 200);
  assertEquals((await metadata.json()).resource, SALES);
  // No such virtual server: no such resource.
  const unknown = await t.app.request("/.well-known/oauth-protected-resource/mcp/nope");
  assertEquals(unknown.status, 404);
  await unknown.body?.cancel();

  // A token for the virtual server is taken there (RFC 8707 audience) ...
  const forSales = await t.token({ scope: "tools:all", aud: SALES });
  {
    await using session = await mcpClient(t.app, bearer(forSales), "/mcp/sales");
    assertEquals(
      (await session.client.listTools()).tools.map((tool: { name: string }) => tool.name),
      ["echo"],
    );
  }
  // ... and nowhere else: not /mcp, not REST.
  const elsewhere = await t.app.request("/tools", { headers: bearer(forSales) });
  assertEquals(elsewhere.status, 401);
  assertStringIncludes(
    (await elsewhere.json()).error.message,
    `does not contain ${AUDIENCE}; ask the issuer`,
  );
  const onMcp = await t.app.request("/mcp", {
    method: "POST",
    headers: {
      ...bearer(forSales),
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
  });
  assertEquals(onMcp.status, 401);
  await onMcp.body?.cancel();
  // A token for the whole /mcp still reaches the virtual server below it.
  await using whole = await mcpClient(
    t.app,
    bearer(await t.token({ scope: "tools:all" })),
    "/mcp/sales",
  );
  assertEquals((await whole.client.listTools()).tools.map((tool: { name: string }) => tool.name), [
    "echo",
  ]);
});

Deno.test("OAuth: scopes decide the tools over REST (403 insufficient_scope) and MCP (isError), audited with subject and client", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer, { jwks_url: `${issuer.issuer}/jwks` }, {
    TOOLGATE_API_TOKEN: ADMIN,
  });
  const reader = await t.token({ scope: "tools:read" });
  const all = await t.token({ scope: "openid tools:all", sub: "user-7", client_id: "ci-agent" });
  const names = async (token: string) =>
    ((await (await t.app.request("/tools", { headers: bearer(token) })).json()).tools as {
      name: string;
    }[]).map((tool) => tool.name);
  assertEquals(await names(reader), ["echo"]);
  assertEquals(await names(all), ["echo", "flaky", "slow", "thrower", "secretive"]);
  // A token with no scope of the rules may call nothing.
  assertEquals(await names(await t.token({ scope: "openid" })), []);
  // An ES256 key works too.
  assertEquals(
    await names(await t.token({ scope: "tools:read", kid: "ec-1", alg: "ES256", key: issuer.ec })),
    [
      "echo",
    ],
  );

  assertEquals(
    (await postJson(t.app, "/tools/echo", { message: "hi" }, bearer(reader))).status,
    200,
  );
  const denied = await postJson(t.app, "/tools/flaky", {}, bearer(reader));
  assertEquals(denied.status, 403);
  const body = await denied.json();
  assertEquals(body.error.code, "FORBIDDEN");
  assertStringIncludes(body.error.message, "may not call flaky");
  assertEquals(challenge(denied).error, "insufficient_scope");
  assertEquals(challenge(denied).scope, "tools:all");
  assertEquals(challenge(denied).resource_metadata, METADATA_URL);
  assertEquals((await postJson(t.app, "/tools/flaky", {}, bearer(all))).status, 200);

  // The management API is the administrator's.
  const audit = await t.app.request("/audit", { headers: bearer(all) });
  assertEquals(audit.status, 403);
  assertStringIncludes((await audit.json()).error.message, "may not use the management API");
  // The administrator's token keeps its path beside OAuth.
  assertEquals((await t.app.request("/audit", { headers: bearer(ADMIN) })).status, 200);

  // Over MCP: the list is filtered, a call outside the scopes is an isError result.
  await using session = await mcpClient(t.app, bearer(reader));
  assertEquals(
    (await session.client.listTools()).tools.map((tool: { name: string }) => tool.name),
    [
      "echo",
    ],
  );
  const refused = await session.client.callTool({ name: "flaky", arguments: {} });
  assertEquals(refused.isError, true);
  assertStringIncludes(JSON.stringify(refused.content), "FORBIDDEN");

  const { entries } = await t.audit.list();
  assertEquals(entries.map((e) => [e.tool, e.outcome.error_code ?? null, e.caller]), [
    ["echo", null, { kind: "oauth", name: "claude-desktop", id: "user-42" }],
    ["flaky", "FORBIDDEN", { kind: "oauth", name: "claude-desktop", id: "user-42" }],
    ["flaky", null, { kind: "oauth", name: "ci-agent", id: "user-7" }],
    ["flaky", "FORBIDDEN", { kind: "oauth", name: "claude-desktop", id: "user-42" }],
  ]);
  const filtered = await (await t.app.request("/audit?caller=ci-agent", { headers: bearer(ADMIN) }))
    .json();
  assertEquals(filtered.entries.length, 1);
});

Deno.test("OAuth: wrong audience, wrong issuer, expired, not yet valid, alg none, HS256 with the public key, forged, malformed and oversized tokens are 401 invalid_token; nothing runs or is recorded", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer, { jwks_url: `${issuer.issuer}/jwks` });
  const other = await generateKeyPair("RS256");
  const now = Math.floor(t.clock.now / 1000);
  const payload = base64url(JSON.stringify({
    iss: issuer.issuer,
    aud: AUDIENCE,
    sub: "user-42",
    scope: "tools:all",
    exp: now + 300,
  }));
  const none = `${base64url(JSON.stringify({ alg: "none", typ: "JWT" }))}.${payload}.`;
  // HS256 keyed with the issuer's public key, the classic confusion attack.
  const spki = await exportSPKI(issuer.rsa.publicKey);
  const hs256 = await new SignJWT({ scope: "tools:all" })
    .setProtectedHeader({ alg: "HS256", kid: "rsa-1" })
    .setIssuer(issuer.issuer).setAudience(AUDIENCE).setSubject("user-42")
    .setExpirationTime(now + 300)
    .sign(new TextEncoder().encode(spki));
  const cases: [string, string][] = [
    [await t.token({ aud: "https://other.example.com/mcp" }), "does not contain " + AUDIENCE],
    [await t.token({ iss: "https://evil.example.com" }), "not by " + issuer.issuer],
    [await t.token({ exp: -120 }), "expired at"],
    [await t.token({ nbf: 600 }), "not valid before"],
    [none, 'algorithm "none" is not accepted'],
    [hs256, 'algorithm "HS256" is not accepted'],
    [await t.token({ key: other }), "signature does not verify"],
    ["abc.def.ghi", "not a JWT"],
    [
      await new CompactSign(new TextEncoder().encode("not json"))
        .setProtectedHeader({ alg: "RS256", kid: "rsa-1" }).sign(issuer.rsa.privateKey),
      "malformed",
    ],
    [`${"a".repeat(5000)}.${"b".repeat(4000)}.c`, "at most 8192"],
  ];
  for (const [token, message] of cases) {
    const response = await postJson(t.app, "/tools/echo", { message: "x" }, bearer(token));
    assertEquals(response.status, 401, message);
    const body = await response.json();
    assertEquals(body.error.code, "UNAUTHORIZED");
    assertStringIncludes(body.error.message, message);
    const params = challenge(response);
    assertEquals(params.resource_metadata, METADATA_URL, message);
    assertEquals(params.error, "invalid_token", message);
    assert(params.error_description.length > 0);
  }
  // Within the clock tolerance (60 s) an expired token still passes.
  assertEquals(
    (await postJson(
      t.app,
      "/tools/echo",
      { message: "x" },
      bearer(await t.token({ exp: -30, scope: "tools:all" })),
    ))
      .status,
    200,
  );
  // A token that is neither a JWT nor a key, and one over 8 KiB of header.
  const opaque = await t.app.request("/tools", { headers: bearer("opaque-token") });
  assertEquals(opaque.status, 401);
  assertStringIncludes((await opaque.json()).error.message, "neither an OAuth access token");
  assertEquals(challenge(opaque).error, "invalid_token");
  const huge = await t.app.request("/tools", { headers: bearer("x".repeat(9000)) });
  assertEquals(huge.status, 401);
  await huge.body?.cancel();
  // Only the one good call was recorded.
  assertEquals((await t.audit.list()).entries.length, 1);
});

Deno.test("OAuth: an unknown key id refreshes the JWKS once, then 401; a rotated key is taken after the cooldown", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer, { jwks_url: `${issuer.issuer}/jwks` });
  assertEquals((await t.app.request("/tools", { headers: bearer(await t.token()) })).status, 200);
  assertEquals(issuer.state.jwksFetches, 1);

  const unknown = await t.token({ kid: "rsa-9" });
  const first = await t.app.request("/tools", { headers: bearer(unknown) });
  assertEquals(first.status, 401);
  assertStringIncludes((await first.json()).error.message, 'no key with kid "rsa-9"');
  assertEquals(challenge(first).error, "invalid_token");
  assertEquals(issuer.state.jwksFetches, 2, "refreshed once");
  const again = await t.app.request("/tools", { headers: bearer(unknown) });
  assertEquals(again.status, 401);
  await again.body?.cancel();
  assertEquals(issuer.state.jwksFetches, 2, "not again within the cooldown");

  // The issuer rotates in a new key; past the cooldown (30 s) a token with it is accepted.
  const rotated = await generateKeyPair("RS256", { extractable: true });
  issuer.state.keys.push(await issuer.publicJwk(rotated, "rsa-2", "RS256"));
  t.clock.now += 31_000;
  const fresh = await t.token({ kid: "rsa-2", key: rotated });
  assertEquals((await t.app.request("/tools", { headers: bearer(fresh) })).status, 200);
  assertEquals(issuer.state.jwksFetches, 3);
  // Known keys need no fetch.
  assertEquals((await t.app.request("/tools", { headers: bearer(fresh) })).status, 200);
  assertEquals(issuer.state.jwksFetches, 3);
});

Deno.test("OAuth: a token verified once is taken again while it is valid, and refused once it expires", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer, { jwks_url: `${issuer.issuer}/jwks` });
  const token = await t.token({ scope: "tools:read", exp: 100 });
  assertEquals((await t.app.request("/tools", { headers: bearer(token) })).status, 200);
  // The issuer goes down: the remembered token needs no key.
  issuer.state.down = true;
  t.clock.now += 30_000;
  assertEquals((await t.app.request("/tools", { headers: bearer(token) })).status, 200);
  assertEquals(issuer.state.jwksFetches, 1);
  // Past exp and the tolerance (100 + 60 s) it is refused, remembered or not.
  issuer.state.down = false;
  t.clock.now += 131_000;
  const expired = await t.app.request("/tools", { headers: bearer(token) });
  assertEquals(expired.status, 401);
  assertStringIncludes((await expired.json()).error.message, "expired at");
  assertEquals(challenge(expired).error, "invalid_token");
});

Deno.test("OAuth: a JWKS that cannot be fetched is 503 UNAVAILABLE with Retry-After, and works again once the issuer is back", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer, { jwks_url: `${issuer.issuer}/jwks` });
  issuer.state.down = true;
  const token = await t.token({ scope: "tools:read" });
  const down = await t.app.request("/tools", { headers: bearer(token) });
  assertEquals(down.status, 503);
  const body = await down.json();
  assertEquals(body.error.code, "UNAVAILABLE");
  assertStringIncludes(body.error.message, "answered HTTP 503");
  assertEquals(down.headers.get("retry-after"), "5");
  // Within the failure cooldown nothing is fetched.
  assertEquals((await t.app.request("/tools", { headers: bearer(token) })).status, 503);
  assertEquals(issuer.state.jwksFetches, 1);

  issuer.state.down = false;
  t.clock.now += 6_000;
  assertEquals((await t.app.request("/tools", { headers: bearer(token) })).status, 200);

  // An issuer nobody listens on: 503 as well, not a crash.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  await using gone = await setup(issuer, { jwks_url: `http://127.0.0.1:${port}/jwks` });
  const refused = await gone.app.request("/tools", { headers: bearer(await gone.token()) });
  assertEquals(refused.status, 503);
  assertStringIncludes((await refused.json()).error.message, "cannot be fetched");
});

Deno.test("OAuth: required_scopes: a token without one is 403 insufficient_scope; the 401 challenge names them", async () => {
  await using issuer = await startIssuer();
  await using t = await setup(issuer, {
    jwks_url: `${issuer.issuer}/jwks`,
    required_scopes: ["mcp"],
  });
  const without = await t.app.request("/tools", {
    headers: bearer(await t.token({ scope: "tools:all" })),
  });
  assertEquals(without.status, 403);
  assertStringIncludes((await without.json()).error.message, "lacks the scope mcp");
  assertEquals(challenge(without).error, "insufficient_scope");
  assertEquals(challenge(without).scope, "mcp");
  const ok = await t.app.request("/tools", {
    headers: bearer(await t.token({ scope: "mcp tools:read" })),
  });
  assertEquals(ok.status, 200);
  await ok.body?.cancel();
  const none = await t.app.request("/tools");
  assertEquals(none.status, 401);
  assertEquals(challenge(none).scope, "mcp");
  await none.body?.cancel();
  const metadata = await (await t.app.request("/.well-known/oauth-protected-resource/mcp")).json();
  assertEquals(metadata.scopes_supported, ["tools:read", "tools:all", "mcp"]);
});

Deno.test("OAuth: a client's token is never passed on to an MCP upstream, which gets only its configured headers", async () => {
  await using issuer = await startIssuer();
  await using fixture = await startHttpFixture();
  await using gw = await pluginGateway([
    mcpUpstreamPlugin({
      name: "remote",
      source: "cli",
      url: fixture.url,
      args: [],
      env: {},
      headers: { "X-Api-Key": "keychain:remote.key" },
      enabled: true,
    }, {
      settings: {
        connectTimeoutMs: 60_000,
        restartInitialMs: 300,
        restartMaxMs: 2_000,
        inheritedEnv: inheritedEnv(Deno.env.toObject()),
      },
      resolveSecret: (name) => Promise.resolve(name === "remote.key" ? "k-1" : undefined),
    }),
  ]);
  const config = await httpConfig({
    auth: {
      oauth: {
        issuer: issuer.issuer,
        audience: AUDIENCE,
        jwks_url: `${issuer.issuer}/jwks`,
        scopes: { "tools:all": ["*"] },
      },
    },
  });
  const app = createApp({ gateway: gw.gateway, config, log: () => {} });
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({ scope: "tools:all" })
    .setProtectedHeader({ alg: "RS256", kid: "rsa-1" })
    .setIssuer(issuer.issuer).setAudience(AUDIENCE).setSubject("user-42")
    .setExpirationTime(now + 300)
    .sign(issuer.rsa.privateKey);
  const header = async (name: string) => {
    const response = await postJson(app, "/tools/remote__header", { name }, bearer(token));
    assertEquals(response.status, 200);
    return ((await response.json()).content as { text: string }[])[0].text;
  };
  assertEquals(await header("Authorization"), "(unset)");
  assertEquals(await header("X-Api-Key"), "k-1");
});

Deno.test("OAuth: auth.oauth is checked at config parse, each error naming its key", () => {
  const bad: [Record<string, unknown>, string][] = [
    [{ issuer: "not a url", audience: AUDIENCE, scopes: { a: ["*"] } }, "auth.oauth.issuer"],
    [{ issuer: "https://as.example.com", scopes: { a: ["*"] } }, "auth.oauth.audience"],
    [
      { issuer: "https://as.example.com", audience: "ftp://x/mcp", scopes: { a: ["*"] } },
      "auth.oauth.audience",
    ],
    [{ issuer: "https://as.example.com", audience: AUDIENCE, scopes: {} }, "auth.oauth.scopes"],
    [
      { issuer: "https://as.example.com", audience: AUDIENCE, scopes: { "a b": ["*"] } },
      "auth.oauth.scopes.a b",
    ],
    [
      { issuer: "https://as.example.com", audience: AUDIENCE, scopes: { a: ["rm -rf"] } },
      "auth.oauth.scopes.a[0]",
    ],
    [
      {
        issuer: "https://as.example.com",
        audience: AUDIENCE,
        scopes: { a: ["*"] },
        clock_tolerance_s: -1,
      },
      "auth.oauth.clock_tolerance_s",
    ],
    [
      { issuer: "https://as.example.com", audience: AUDIENCE, scopes: { a: ["*"] }, jwks: "x" },
      "auth.oauth",
    ],
  ];
  for (const [oauth, key] of bad) {
    try {
      parseConfigFile({ auth: { oauth } });
      throw new Error(`accepted ${JSON.stringify(oauth)}`);
    } catch (error) {
      assert(error instanceof GatewayError, String(error));
      assertEquals(error.code, "CONFIG_INVALID");
      assertStringIncludes(error.message, key);
    }
  }
  const good = parseConfigFile({
    auth: { oauth: { issuer: "https://as.example.com", audience: AUDIENCE, scopes: { a: ["*"] } } },
  });
  assertEquals(good.auth.oauth?.clock_tolerance_s, 60);
  assertEquals(good.auth.oauth?.required_scopes, []);
  assertEquals(parseConfigFile({}).auth.oauth, undefined);
});
