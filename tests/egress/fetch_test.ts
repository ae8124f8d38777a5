import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { ROOT, tempHome } from "../_helpers.ts";
import { testCertificates } from "../_tls.ts";
import {
  type EgressConfig,
  egressFetch,
  EgressPolicy,
  egressPolicyFromConfig,
} from "../../src/egress/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from "node:zlib";

/** A policy that resolves every name to 127.0.0.1 and allows it. */
function pinnedTo127(): EgressPolicy {
  return new EgressPolicy({
    allow: ["127.0.0.1/32"],
    marker: "dep_fetch",
    lookup: () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]),
  });
}

Deno.test("egressFetch() over https connects to the checked address and verifies the URL's host", async () => {
  await using tmp = await tempHome();
  const pair = await testCertificates(tmp.home, ["pinned.test"]);
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert: pair.cert, key: pair.key, onListen() {} },
    async (request) =>
      Response.json({
        host: request.headers.get("host"),
        loop: request.headers.get("x-toolgate-loop"),
        body: await request.text(),
      }),
  );
  const fetch = egressFetch({ policy: pinnedTo127(), profile: "public", caCerts: [pair.ca] });
  const response = await fetch(`https://pinned.test:${server.addr.port}/x`, {
    method: "POST",
    body: "hello",
  });
  assertEquals(response.status, 200);
  assertEquals(await response.json(), {
    host: `pinned.test:${server.addr.port}`,
    loop: "dep_fetch",
    body: "hello",
  });
  // Without the CA the certificate is not trusted: the TLS check still runs against pinned.test.
  const untrusting = egressFetch({ policy: pinnedTo127(), profile: "public" });
  await assertRejects(() => untrusting(`https://pinned.test:${server.addr.port}/x`));
});

Deno.test("egressFetch() refuses before connecting, and an abort ends a request in flight", async () => {
  const fetch = egressFetch({ policy: new EgressPolicy(), profile: "public" });
  const error = await assertRejects(() => fetch("http://127.0.0.1:9/"), GatewayError);
  assertEquals(error.code, "EGRESS_DENIED");
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepted: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) accepted.push(conn);
  })().catch(() => {});
  try {
    const silent = egressFetch({ policy: pinnedTo127(), profile: "public" });
    const controller = new AbortController();
    const pending = silent(`http://silent.test:${(listener.addr as Deno.NetAddr).port}/`, {
      signal: controller.signal,
    });
    while (accepted.length === 0) await new Promise((r) => setTimeout(r, 5));
    controller.abort(new DOMException("gone", "TimeoutError"));
    const reason = await assertRejects(() => pending);
    assert(reason instanceof DOMException && reason.name === "TimeoutError", String(reason));
  } finally {
    listener.close();
    for (const conn of accepted) conn.close();
    await accepting;
  }
});

Deno.test("with a proxy configured, egressFetch() still checks the target's addresses before handing the request to fetch", async () => {
  const proxied = new EgressPolicy({ proxied: true });
  const error = await assertRejects(
    () => egressFetch({ policy: proxied, profile: "public" })("http://127.0.0.1:9/"),
    GatewayError,
  );
  assertEquals(error.code, "EGRESS_DENIED");
  // Allowed, the request goes through the global fetch (here without a proxy in the environment).
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (request) => new Response(request.headers.get("x-toolgate-loop")),
  );
  const allowed = new EgressPolicy({ proxied: true, allow: ["127.0.0.1/32"], marker: "dep_p" });
  const response = await egressFetch({ policy: allowed, profile: "public" })(
    `http://127.0.0.1:${server.addr.port}/`,
  );
  assertEquals(await response.text(), "dep_p");
});

Deno.test("a CA from DENO_CERT is trusted for https beside the built-in roots, as fetch trusts it", async () => {
  await using tmp = await tempHome();
  const pair = await testCertificates(tmp.home, ["pinned.test"]);
  await Deno.writeTextFile(`${tmp.home}/company-ca.pem`, pair.ca);
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert: pair.cert, key: pair.key, onListen() {} },
    () => new Response("trusted"),
  );
  const policy = egressPolicyFromConfig({
    egress: { allow: ["127.0.0.1/32"] },
    server: { host: "127.0.0.1", port: 0 },
    env: { DENO_CERT: `${tmp.home}/company-ca.pem` },
  } as unknown as EgressConfig, {
    lookup: () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]),
  });
  assertEquals(policy.caCerts, [pair.ca]);
  const fetch = egressFetch({ policy, profile: "public" });
  const response = await fetch(`https://pinned.test:${server.addr.port}/`);
  assertEquals(await response.text(), "trusted");
  const unreadable = egressPolicyFromConfig({
    egress: { allow: [] },
    server: { host: "127.0.0.1", port: 0 },
    env: { DENO_CERT: `${tmp.home}/missing.pem` },
  } as unknown as EgressConfig);
  assertEquals(unreadable.caCerts, []);
});

Deno.test("DENO_TLS_CA_STORE=system trusts the operating system's store for https, as Deno does for fetch", async () => {
  await using tmp = await tempHome();
  const pair = await testCertificates(tmp.home, ["pinned.test"]);
  // SSL_CERT_FILE stands for the system store here (Deno reads it in its place).
  await Deno.writeTextFile(`${tmp.home}/system-ca.pem`, pair.ca);
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert: pair.cert, key: pair.key, onListen() {} },
    () => new Response("trusted"),
  );
  // The system store is read once per process: a child process, its environment set.
  const script = `${tmp.home}/fetch_system.ts`;
  await Deno.writeTextFile(
    script,
    `import { egressFetch, egressPolicyFromConfig } from "${ROOT}src/egress/mod.ts";
const policy = egressPolicyFromConfig({
  egress: { allow: ["127.0.0.1/32"] },
  server: { host: "127.0.0.1", port: 0 },
  env: Deno.env.toObject(),
} as never, { lookup: () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]) });
try {
  const response = await egressFetch({ policy, profile: "public" })(Deno.args[0]);
  console.log(JSON.stringify({ stores: policy.caStores, body: await response.text() }));
} catch (error) {
  console.log(JSON.stringify({ stores: policy.caStores, error: String(error) }));
}
`,
  );
  const run = async (store: string | undefined) => {
    const env: Record<string, string> = { SSL_CERT_FILE: `${tmp.home}/system-ca.pem` };
    if (store !== undefined) env.DENO_TLS_CA_STORE = store;
    const output = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--cached-only",
        "--config",
        `${ROOT}deno.json`,
        script,
        `https://pinned.test:${server.addr.port}/`,
      ],
      env,
      stdout: "piped",
      stderr: "inherit",
    }).output();
    return JSON.parse(new TextDecoder().decode(output.stdout)) as {
      stores: string[];
      body?: string;
      error?: string;
    };
  };
  assertEquals(await run("system"), { stores: ["system"], body: "trusted" });
  assertEquals(await run("mozilla,system"), { stores: ["mozilla", "system"], body: "trusted" });
  // Mozilla's roots alone (the default) do not know the CA.
  const untrusted = await run(undefined);
  assertEquals(untrusted.stores, ["mozilla"]);
  assert(
    untrusted.error && /certificate|issuer|self[- ]signed/i.test(untrusted.error),
    untrusted.error,
  );
});

Deno.test("egressFetch() asks for gzip, deflate and br and decodes them as fetch does; a corrupt body errors", async () => {
  const text = "toolgate ".repeat(2000);
  const coded: Record<string, Uint8Array> = {
    gzip: gzipSync(text),
    deflate: deflateSync(text),
    br: brotliCompressSync(text),
    // Raw deflate (no zlib header), which some servers send as "deflate".
    "deflate-raw": deflateRawSync(text),
  };
  const seen: (string | null)[] = [];
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (request) => {
      seen.push(request.headers.get("accept-encoding"));
      const coding = new URL(request.url).searchParams.get("coding")!;
      const body = coding === "corrupt"
        ? new Uint8Array([0x1f, 0x8b, 8, 0, 1, 2, 3])
        : coded[coding];
      const header = coding === "corrupt" ? "gzip" : coding === "deflate-raw" ? "deflate" : coding;
      return new Response(body as Uint8Array<ArrayBuffer>, {
        headers: { "content-encoding": header },
      });
    },
  );
  const policy = new EgressPolicy({ allow: ["127.0.0.1/32"] });
  const fetch = egressFetch({ policy, profile: "public" });
  const base = `http://127.0.0.1:${server.addr.port}/`;
  for (const coding of ["gzip", "deflate", "br", "deflate-raw"]) {
    const response = await fetch(`${base}?coding=${coding}`);
    assertEquals(
      response.headers.get("content-encoding"),
      coding === "deflate-raw" ? "deflate" : coding,
      "the headers stay as sent",
    );
    assertEquals(await response.text(), text, coding);
  }
  assertEquals(seen, Array(4).fill("gzip, deflate, br"));
  // A caller's own accept-encoding is sent as it is.
  const identity = await fetch(`${base}?coding=gzip`, {
    headers: { "accept-encoding": "identity" },
  });
  await identity.body?.cancel();
  assertEquals(seen.at(-1), "identity");
  const corrupt = await fetch(`${base}?coding=corrupt`);
  await assertRejects(() => corrupt.text());
});
