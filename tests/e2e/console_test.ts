/**
 * The web console's access rules without a browser, against the real server
 * process: open without a token (forms still need their CSRF token and the
 * same origin), closed to API keys, the cookie's flags.
 */
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";

function csrfOf(html: string): string {
  const match = /name="_csrf" value="([^"]+)"/.exec(html);
  assert(match, "the page has a CSRF token");
  return match[1];
}

Deno.test("console: open without a token, forms need their CSRF token and the same origin", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home });
  const page = await fetch(`${server.url}/ui`);
  assertEquals(page.status, 200);
  const html = await page.text();
  assertMatch(html, /<h1>Overview<\/h1>/);
  assert(!html.includes("Sign out"), "no sign-out on an open console");
  assertEquals(page.headers.get("x-frame-options"), "DENY");
  assertMatch(page.headers.get("content-security-policy") ?? "", /default-src 'none'/);
  const csrf = csrfOf(await (await fetch(`${server.url}/ui/tools/memory_set`)).text());

  const post = (headers: Record<string, string>, body: Record<string, string>) =>
    fetch(`${server.url}/ui/tools/memory_set`, {
      method: "POST",
      headers,
      body: new URLSearchParams(body),
    });
  const args = { arguments: '{"key": "k", "value": "v"}' };
  const noToken = await post({ origin: server.url }, args);
  assertEquals(noToken.status, 403, "no CSRF token");
  assertMatch(await noToken.text(), /CSRF token/);
  const otherOrigin = await post({ origin: "http://localhost:1" }, { ...args, _csrf: csrf });
  assertEquals(otherOrigin.status, 403, "another origin");
  assertMatch(await otherOrigin.text(), /own pages/);
  const ok = await post({ origin: server.url }, { ...args, _csrf: csrf });
  assertEquals(ok.status, 200);
  assertMatch(await ok.text(), /id="tool-result"/);

  // An error answers a page, with the code.
  const missing = await fetch(`${server.url}/ui/dlq/dlq_missing`);
  assertEquals(missing.status, 404);
  assertEquals(missing.headers.get("content-type"), "text/html; charset=utf-8");
  assertMatch(await missing.text(), /<code>NOT_FOUND<\/code>/);

  // Sign-in has nothing to do: back to the console.
  const login = await fetch(`${server.url}/ui/login`, { redirect: "manual" });
  await login.body?.cancel();
  assertEquals(login.status, 303);
  assertEquals(login.headers.get("location"), "/ui");
});

Deno.test("console: API keys without TOOLGATE_API_TOKEN close it and say what it needs", async () => {
  await using tmp = await tempHome();
  const key = await runCli(["keys", "create", "--name", "ci"], { home: tmp.home });
  assertEquals(key.code, 0, key.stderr);
  await using server = await startHttpServer({ home: tmp.home });
  const page = await fetch(`${server.url}/ui`, { redirect: "manual" });
  await page.body?.cancel();
  assertEquals(page.status, 303);
  const login = await fetch(`${server.url}${page.headers.get("location")}`);
  assertMatch(await login.text(), /The console needs TOOLGATE_API_TOKEN/);
  // An API key is not a console sign-in.
  const signIn = await fetch(`${server.url}/ui/login`, {
    method: "POST",
    headers: { origin: server.url },
    body: new URLSearchParams({ token: key.stdout.trim() }),
    redirect: "manual",
  });
  assertEquals(signIn.status, 401);
  assertEquals(signIn.headers.get("set-cookie"), null);
  await signIn.body?.cancel();
  const events = await fetch(`${server.url}/ui/events`);
  assertEquals(events.status, 401);
  await events.body?.cancel();
});

Deno.test("console: the session cookie holds no token and ends on sign-out", async () => {
  await using tmp = await tempHome();
  const token = "cookie-test-token-abcdef";
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: token },
  });
  const signIn = await fetch(`${server.url}/ui/login`, {
    method: "POST",
    headers: { origin: server.url },
    body: new URLSearchParams({ token, next: "https://evil.example/" }),
    redirect: "manual",
  });
  await signIn.body?.cancel();
  assertEquals(signIn.status, 303);
  assertEquals(signIn.headers.get("location"), "/ui", "never a redirect off the console");
  const setCookie = signIn.headers.get("set-cookie") ?? "";
  assertMatch(
    setCookie,
    /^toolgate_console=[\w-]+\.[\w-]+; Max-Age=43200; Path=\/ui; HttpOnly; SameSite=Strict$/,
  );
  assert(!setCookie.includes(token));
  const cookie = setCookie.split(";")[0];
  // The cookie opens the console, not the API.
  const api = await fetch(`${server.url}/tools`, { headers: { cookie } });
  assertEquals(api.status, 401);
  await api.body?.cancel();
  const events = await fetch(`${server.url}/ui/events`, { headers: { cookie } });
  assertEquals(events.status, 200);
  assertEquals(events.headers.get("content-type"), "text/event-stream; charset=utf-8");
  await events.body?.cancel();
  const page = await fetch(`${server.url}/ui`, { headers: { cookie } });
  const csrf = csrfOf(await page.text());
  const out = await fetch(`${server.url}/ui/logout`, {
    method: "POST",
    headers: { cookie, origin: server.url },
    body: new URLSearchParams({ _csrf: csrf }),
    redirect: "manual",
  });
  await out.body?.cancel();
  assertEquals(out.status, 303);
  const again = await fetch(`${server.url}/ui`, { headers: { cookie }, redirect: "manual" });
  await again.body?.cancel();
  assertEquals(again.status, 303, "the session ended");
});
