/**
 * Console sessions across instances, in process (`app.request()`): several
 * apps, each on its own handle of one store (a Deno KV file, a PostgreSQL
 * database), as instances behind a load balancer would be. A session made
 * on one is honoured by the others with its CSRF token, also by an app
 * started after it (a restart); signing out on one ends it on all; a
 * changed API token refuses the old cookies; an expired session is refused.
 */
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { startPostgres } from "../_postgres.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { consoleRoutes, type ToolgateApp } from "../../src/http/mod.ts";
import { SESSION_TTL_MS } from "../../src/http/ui/session.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import type { Store } from "../../src/store/mod.ts";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";
import { testApp } from "./_fixtures.ts";

const ORIGIN = "http://localhost";
const TOKEN = "console-sessions-token-0123456789";

/** One instance: an app whose console keeps its sessions on `store`. */
interface Instance extends AsyncDisposable {
  app: ToolgateApp;
}

/** Opens another handle on the shared store (closed by the case). */
type OpenHandle = () => Promise<Store>;

async function instance(store: Store, token: string, now: () => number): Promise<Instance> {
  const audit = createAuditLog({ store });
  const t = await testApp({
    env: { TOOLGATE_API_TOKEN: token },
    routes: [consoleRoutes({ store, audit, now })],
  });
  return {
    app: t.app,
    async [Symbol.asyncDispose]() {
      await t[Symbol.asyncDispose]();
      await audit.close();
    },
  };
}

/** Signs in with `token`; the `name=value` of the session cookie. */
async function signIn(app: ToolgateApp, token: string): Promise<string> {
  const response = await app.request("/ui/login", {
    method: "POST",
    headers: { origin: ORIGIN },
    body: new URLSearchParams({ token }),
  });
  await response.body?.cancel();
  assertEquals(response.status, 303, "signed in");
  const cookie = response.headers.get("set-cookie") ?? "";
  assertMatch(cookie, /^toolgate_console=[\w-]+\.[\w-]+; Max-Age=43200; Path=\/ui; HttpOnly; /);
  assert(!cookie.includes(token), "never the token in the cookie");
  return cookie.split(";")[0];
}

/** The overview with a cookie: its CSRF token, or `undefined` when it sends to the sign-in. */
async function overview(app: ToolgateApp, cookie: string): Promise<string | undefined> {
  const response = await app.request("/ui", { headers: { cookie } });
  const html = await response.text();
  if (response.status === 303) {
    assertMatch(response.headers.get("location") ?? "", /^\/ui\/login\?next=/);
    return undefined;
  }
  assertEquals(response.status, 200);
  assertMatch(html, /Sign out/);
  return /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
}

/** Calls `echo` through the console's form. */
async function tryTool(app: ToolgateApp, cookie: string, csrf: string): Promise<Response> {
  return await app.request("/ui/tools/echo", {
    method: "POST",
    headers: { cookie, origin: ORIGIN },
    body: new URLSearchParams({ arguments: '{"message": "hi"}', _csrf: csrf }),
  });
}

/** Every case, each on fresh handles of the shared store. */
const CASES: Record<string, (open: OpenHandle) => Promise<void>> = {
  async "a session made on one instance opens the others, its CSRF token too, and survives a restart"(
    open,
  ) {
    await using a = await instance(await open(), TOKEN, Date.now);
    await using b = await instance(await open(), TOKEN, Date.now);
    const cookie = await signIn(a.app, TOKEN);
    const csrf = await overview(a.app, cookie);
    assert(csrf, "the page has a CSRF token");
    assertEquals(await overview(b.app, cookie), csrf, "the same CSRF token on both");
    const call = await tryTool(b.app, cookie, csrf);
    assertEquals(call.status, 200);
    assertMatch(await call.text(), /id="tool-result"[^>]*>[^<]*echoed/);
    const stale = await tryTool(b.app, cookie, `${csrf.slice(1)}x`);
    assertEquals(stale.status, 403, "another CSRF token is still refused");
    await stale.body?.cancel();
    // An instance started after the sign-in (a restart) knows the session.
    await using later = await instance(await open(), TOKEN, Date.now);
    assertEquals(await overview(later.app, cookie), csrf);
  },

  async "signing out on one instance ends the session on every other"(open) {
    await using a = await instance(await open(), TOKEN, Date.now);
    await using b = await instance(await open(), TOKEN, Date.now);
    const cookie = await signIn(a.app, TOKEN);
    const kept = await signIn(a.app, TOKEN);
    const csrf = await overview(a.app, cookie);
    assert(csrf);
    const out = await b.app.request("/ui/logout", {
      method: "POST",
      headers: { cookie, origin: ORIGIN },
      body: new URLSearchParams({ _csrf: csrf }),
    });
    await out.body?.cancel();
    assertEquals(out.status, 303);
    assertEquals(out.headers.get("location"), "/ui/login");
    assertMatch(out.headers.get("set-cookie") ?? "", /^toolgate_console=; Max-Age=0; Path=\/ui/);
    assertEquals(await overview(a.app, cookie), undefined, "signed out on the other instance");
    const form = await tryTool(a.app, cookie, csrf);
    assertEquals(form.status, 401, "its forms are refused");
    await form.body?.cancel();
    assert(await overview(a.app, kept), "another session stays");
  },

  async "a changed API token refuses the old cookies"(open) {
    await using before = await instance(await open(), TOKEN, Date.now);
    const cookie = await signIn(before.app, TOKEN);
    const csrf = await overview(before.app, cookie);
    assert(csrf);
    // The instances restarted with another token, on the same store.
    const rotated = `${TOKEN}-rotated`;
    await using after = await instance(await open(), rotated, Date.now);
    assertEquals(await overview(after.app, cookie), undefined, "the old session is refused");
    const form = await tryTool(after.app, cookie, csrf);
    assertEquals(form.status, 401);
    await form.body?.cancel();
    // The old token does not sign in any more; the new one does, and its CSRF tokens differ.
    const refused = await after.app.request("/ui/login", {
      method: "POST",
      headers: { origin: ORIGIN },
      body: new URLSearchParams({ token: TOKEN }),
    });
    assertEquals(refused.status, 401);
    await refused.body?.cancel();
    const fresh = await signIn(after.app, rotated);
    const freshCsrf = await overview(after.app, fresh);
    assert(freshCsrf && freshCsrf !== csrf);
    assertEquals(
      await overview(before.app, fresh),
      undefined,
      "nor does the old key take new cookies",
    );
  },

  async "an expired session is refused by every instance"(open) {
    const clock = { now: Date.now() };
    const now = () => clock.now;
    await using a = await instance(await open(), TOKEN, now);
    await using b = await instance(await open(), TOKEN, now);
    const cookie = await signIn(a.app, TOKEN);
    clock.now += SESSION_TTL_MS - 1;
    const csrf = await overview(b.app, cookie);
    assert(csrf, "live until its last millisecond");
    clock.now += 1;
    assertEquals(await overview(a.app, cookie), undefined);
    assertEquals(await overview(b.app, cookie), undefined);
    const form = await tryTool(b.app, cookie, csrf);
    assertEquals(form.status, 401);
    await form.body?.cancel();
  },
};

/** Runs every case as a step, each on a fresh data dir whose stores `open` opens (and it closes). */
async function stepCases(
  t: Deno.TestContext,
  open: (dataDir: string) => Promise<Store>,
): Promise<void> {
  for (const [name, run] of Object.entries(CASES)) {
    await t.step(name, async () => {
      const dataDir = await Deno.makeTempDir({ prefix: "toolgate-console-sessions-" });
      const opened: Store[] = [];
      try {
        await run(async () => {
          const store = await open(dataDir);
          opened.push(store);
          return store;
        });
      } finally {
        for (const store of opened) await store.close();
        await Deno.remove(dataDir, { recursive: true });
      }
    });
  }
}

Deno.test("console sessions on one Deno KV file", async (t) => {
  await stepCases(t, (dataDir) => openKvStore({ dataDir }));
});

Deno.test("console sessions on one PostgreSQL database", async (t) => {
  await using pg = await startPostgres({ database: "console_sessions" });
  await stepCases(t, (dataDir) => openPostgresStore({ url: pg.url, dataDir, pool: { max: 2 } }));
});
