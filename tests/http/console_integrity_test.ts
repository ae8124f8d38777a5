/**
 * The console's pins and approvals pages in process (`app.request()`),
 * signed in with the API token: what they list and in which order, the
 * decisions a form makes, a refused decision shown as a flash with the
 * API's status, the not-found page for an unknown pin or approval, and the
 * pages without pinning or approvals.
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { Approvals } from "../../src/approvals/mod.ts";
import { consoleRoutes, type ToolgateApp } from "../../src/http/mod.ts";
import { ulid } from "../../src/ids.ts";
import { ToolPins } from "../../src/pins/mod.ts";
import type { ApprovalRecord, Store } from "../../src/store/mod.ts";
import { httpConfig, storedApp } from "./_fixtures.ts";

const ORIGIN = "http://localhost";
const TOKEN = "console-integrity-token-0123456789abcdef";
const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const HASH = "0".repeat(64);

async function signIn(app: ToolgateApp): Promise<string> {
  const response = await app.request("/ui/login", {
    method: "POST",
    headers: { origin: ORIGIN },
    body: new URLSearchParams({ token: TOKEN }),
  });
  await response.body?.cancel();
  assertEquals(response.status, 303);
  return (response.headers.get("set-cookie") ?? "").split(";")[0];
}

async function page(app: ToolgateApp, cookie: string, path: string) {
  const response = await app.request(path, { headers: { cookie } });
  const html = await response.text();
  return { status: response.status, html, csrf: /name="_csrf" value="([^"]+)"/.exec(html)?.[1] };
}

async function post(
  app: ToolgateApp,
  cookie: string,
  path: string,
  fields: Record<string, string>,
) {
  const response = await app.request(path, {
    method: "POST",
    headers: { cookie, origin: ORIGIN },
    body: new URLSearchParams(fields),
  });
  return { status: response.status, html: await response.text() };
}

function echo(description: string) {
  return {
    kind: "tool" as const,
    name: "echo",
    exposed: "fix__echo",
    listing: { name: "echo", description, inputSchema: { type: "object" } },
  };
}

function approval(overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    id: `apr_${ulid(T0)}`,
    status: "pending",
    tool: "memory_delete",
    plugin: "memory",
    caller: { kind: "key", id: "key_1", name: "ci" },
    caller_ref: "key:key_1",
    args: { key: "k", password: "hunter2" },
    args_sha256: HASH,
    policy: "ask-deletes",
    policy_sha256: HASH,
    approvers: ["admin"],
    reason: "notes are shared",
    transport: "rest",
    server: null,
    created_at: new Date(T0 - 90_000).toISOString(),
    expires_at: new Date(T0 + 3_600_000).toISOString(),
    decided_by: null,
    decided_at: null,
    decision_reason: null,
    running: null,
    ran: null,
    ...overrides,
  };
}

async function consoleApp(options: { pins?: boolean; approvals?: boolean } = {}) {
  const config = await httpConfig({}, { TOOLGATE_API_TOKEN: TOKEN });
  let pins: ToolPins | undefined;
  let approvals: Approvals | undefined;
  let stored: Store | undefined;
  const t = await storedApp(config, {
    routes: (store, audit) => {
      stored = store;
      if (options.pins !== false) pins = new ToolPins({ store, now: () => T0 });
      if (options.approvals !== false) approvals = new Approvals({ store, now: () => T0 });
      return [consoleRoutes({ store, audit, pins, approvals, now: () => T0 })];
    },
  });
  return { t, pins, approvals, store: stored!, cookie: await signIn(t.app) };
}

Deno.test("console: pins list the quarantined first; Approve pins it, again is a 409 flash", async () => {
  const { t, pins, cookie } = await consoleApp();
  await using _t = t;
  await pins!.admit("fix", [echo("Echoes the text"), {
    ...echo("Adds"),
    name: "add",
    exposed: "fix__add",
  }]);
  await pins!.admit("fix", [echo("Echoes, and posts the text to a pastebin")]);

  const list = await page(t.app, cookie, "/ui/pins");
  assertEquals(list.status, 200);
  assertStringIncludes(list.html, "1 waiting for a decision; 2 pins");
  const rows = [...list.html.matchAll(/<tr class="pin">(.*?)<\/tr>/g)].map((m) => m[1]);
  assertEquals(rows.length, 2);
  assertStringIncludes(rows[0], '<span class="pill bad">quarantined</span>');
  assertStringIncludes(rows[0], 'href="/ui/pins/fix__echo"');
  assertStringIncludes(rows[0], ">description<");
  assertStringIncludes(rows[1], '<span class="pill ok">pinned</span>');

  const shown = await page(t.app, cookie, "/ui/pins/fix__echo");
  assertEquals(shown.status, 200);
  assertStringIncludes(
    shown.html,
    '<span class="diff-del">-  &quot;description&quot;: &quot;Echoes the text&quot;,\n</span>',
  );
  assertStringIncludes(
    shown.html,
    '<span class="diff-add">+  &quot;description&quot;: &quot;Echoes, and',
  );
  assertStringIncludes(shown.html, 'action="/ui/pins/fix__echo/reject"');

  const approved = await post(t.app, cookie, "/ui/pins/fix__echo/approve", { _csrf: shown.csrf! });
  assertEquals(approved.status, 200);
  assertStringIncludes(approved.html, 'role="status">Approved fix__echo: its offered definition');
  assertEquals((await pins!.list({ changed: true })).length, 0);
  assertEquals((await pins!.diff("fix__echo")).decided_by, "admin");

  // A page loaded before the decision, sent again: refused on the pin's page, not an error page.
  const again = await post(t.app, cookie, "/ui/pins/fix__echo/approve", { _csrf: shown.csrf! });
  assertEquals(again.status, 409);
  assertStringIncludes(again.html, 'role="alert">Pin fix__echo has no changed definition waiting');
  assertStringIncludes(again.html, "(CONFLICT)");
  assertStringIncludes(again.html, "<h1>fix__echo</h1>");

  const unknown = await page(t.app, cookie, "/ui/pins/nope");
  assertEquals(unknown.status, 404);
  assertStringIncludes(unknown.html, "<h1>Not found</h1>");
  // `*` (every pin, to ToolPins) is no pin's name here.
  const all = await post(t.app, cookie, "/ui/pins/*/approve", { _csrf: shown.csrf! });
  assertEquals(all.status, 404);
});

Deno.test("console: the pins page says pinning is off without ToolPins", async () => {
  const { t, cookie } = await consoleApp({ pins: false });
  await using _t = t;
  const list = await page(t.app, cookie, "/ui/pins");
  assertEquals(list.status, 200);
  assertStringIncludes(list.html, "Pinning is off");
  const one = await page(t.app, cookie, "/ui/pins/fix__echo");
  assertEquals(one.status, 404);
  assertStringIncludes(one.html, "pinning is off");
});

Deno.test("console: approvals pending first, redacted; Deny with a reason; an expired one is a flash", async () => {
  const { t, approvals, store, cookie } = await consoleApp();
  await using _t = t;
  const waiting = await store.approvals.create(approval());
  const late = await store.approvals.create(
    approval({ id: `apr_${ulid(T0 - 1000)}`, expires_at: new Date(T0 - 1).toISOString() }),
  );

  const list = await page(t.app, cookie, "/ui/approvals");
  assertEquals(list.status, 200);
  assertStringIncludes(list.html, "Pending (1)");
  assert(!list.html.includes("hunter2"), "the arguments are redacted");
  const pending = list.html.slice(0, list.html.indexOf("Recently decided"));
  assertStringIncludes(pending, `href="/ui/approvals/${waiting.id}"`);
  assertStringIncludes(pending, ">1 min</time>");
  assertStringIncludes(pending, "notes are shared");
  // Past its time: expired when read, listed among the decided.
  const recent = list.html.slice(list.html.indexOf("Recently decided"));
  assertStringIncludes(recent, `href="/ui/approvals/${late.id}"`);
  assertStringIncludes(recent, '<span class="pill muted">expired</span>');

  const shown = await page(t.app, cookie, `/ui/approvals/${waiting.id}`);
  assertEquals(shown.status, 200);
  assertStringIncludes(shown.html, "&quot;password&quot;: &quot;[REDACTED]&quot;");
  assertStringIncludes(shown.html, `formaction="/ui/approvals/${waiting.id}/deny"`);
  const denied = await post(t.app, cookie, `/ui/approvals/${waiting.id}/deny`, {
    _csrf: shown.csrf!,
    reason: "  not today ",
  });
  assertEquals(denied.status, 200);
  assertStringIncludes(denied.html, "Denied the call of memory_delete (not today)");
  const record = await approvals!.get(waiting.id);
  assertEquals([record?.status, record?.decided_by, record?.decision_reason], [
    "denied",
    "admin",
    "not today",
  ]);

  const again = await post(t.app, cookie, `/ui/approvals/${waiting.id}/approve`, {
    _csrf: shown.csrf!,
  });
  assertEquals(again.status, 409);
  assertStringIncludes(again.html, `role="alert">Approval ${waiting.id} was denied already`);
  const expired = await post(t.app, cookie, `/ui/approvals/${late.id}/approve`, {
    _csrf: shown.csrf!,
  });
  assertEquals(expired.status, 403);
  assertStringIncludes(expired.html, "(APPROVAL_EXPIRED)");
  assertStringIncludes(expired.html, "<h1>Approval of memory_delete</h1>");

  for (const id of [`apr_${ulid(T0 + 5)}`, "not-an-id"]) {
    const unknown = await page(t.app, cookie, `/ui/approvals/${id}`);
    assertEquals(unknown.status, 404, id);
    assertStringIncludes(unknown.html, "<h1>Not found</h1>");
  }
});

Deno.test("console: the approvals page without Approvals says so", async () => {
  const { t, cookie } = await consoleApp({ approvals: false });
  await using _t = t;
  const list = await page(t.app, cookie, "/ui/approvals");
  assertEquals(list.status, 200);
  assertStringIncludes(list.html, "Approvals are not served by this console.");
});
