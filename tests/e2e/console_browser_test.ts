/**
 * The web console at /ui, driven in Debian's Chromium against the real
 * server process: sign in, a delivery appearing live, a dead letter
 * replayed and delivered, an audit verify, a tool call; screenshots go to
 * test-artifacts/console/ (and docs/console/ with UPDATE_DOCS_SCREENSHOTS=1).
 */
import type { Page } from "playwright-core";
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { ROOT, runCli, tempHome, until } from "../_helpers.ts";
import { ARTIFACTS, launchChromium } from "./_browser.ts";
import { startHttpServer } from "./_http_server.ts";

const TOKEN = "console-test-token-0123456789";
const DOCS = Deno.env.get("UPDATE_DOCS_SCREENSHOTS") === "1" ? `${ROOT}docs/console` : undefined;

function receiver() {
  const requests: { type: string; id: string }[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = await req.json();
    requests.push({ type: body.type, id: body.id });
    return new Response(null, { status: 204 });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    requests,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

async function shot(page: Page, name: string, docs = false): Promise<void> {
  await page.screenshot({ path: `${ARTIFACTS}/${name}.png` });
  if (docs && DOCS) await page.screenshot({ path: `${DOCS}/${name}.png` });
}

Deno.test({
  name: "console: sign in, live delivery, dead-letter replay, audit verify, tool call",
  // playwright-core keeps its pipe to the browser and timers of its own.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await Deno.mkdir(ARTIFACTS, { recursive: true });
    if (DOCS) await Deno.mkdir(DOCS, { recursive: true });
    await using tmp = await tempHome();
    // An incoming endpoint whose handler refuses the payload: a failed job at once.
    const created = await runCli(
      [
        "webhooks",
        "create",
        "--name",
        "refused",
        "--path",
        "/hooks/refused",
        "--handler",
        "memory_set",
      ],
      { home: tmp.home },
    );
    assertEquals(created.code, 0, created.stderr);
    await using live = receiver();
    await using late = receiver();
    await using server = await startHttpServer({
      home: tmp.home,
      env: { TOOLGATE_API_TOKEN: TOKEN },
    });
    const api = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      assert(response.ok, `${method} ${path}: ${response.status} ${text}`);
      return text ? JSON.parse(text) : undefined;
    };
    await api("POST", "/webhooks", { url: live.url, events: ["tool.called"] });
    const { webhook: lateHook } = await api("POST", "/webhooks", {
      url: late.url,
      events: ["tool.called"],
      secret: null,
    });
    // Disabled: its events go straight to the dead-letter queue.
    await api("POST", `/webhooks/${lateHook.id}/disable`, {});

    // Without a session, /ui is refused by the token check's own rules.
    const anonymous = await fetch(`${server.url}/ui`, { redirect: "manual" });
    await anonymous.body?.cancel();
    assertEquals(anonymous.status, 303);
    assertEquals(anonymous.headers.get("location"), "/ui/login?next=%2Fui");

    await using browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));

    // Sign in.
    await page.goto(`${server.url}/ui`);
    assertEquals(new URL(page.url()).pathname, "/ui/login");
    await page.getByLabel("API token").fill("wrong");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("That is not the API token (TOOLGATE_API_TOKEN).").waitFor();
    await page.getByLabel("API token").fill(TOKEN);
    await shot(page, "sign-in");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    const [cookie] = await context.cookies();
    assertEquals(cookie.name, "toolgate_console");
    assert(cookie.httpOnly, "the session cookie is HttpOnly");
    assertEquals(cookie.sameSite, "Strict");
    assert(!cookie.value.includes(TOKEN), "the cookie never holds the token");
    assert(!page.url().includes(TOKEN), "the token is in no URL");
    await page.getByText("Live: connected").waitFor();

    // A delivery appears live on the webhooks page.
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByRole("heading", { name: "Outgoing webhooks" }).waitFor();
    const liveAttempts = page.getByRole("table", { name: `Recent attempts to ${live.url}` });
    assertEquals(await liveAttempts.count(), 0);
    await api("POST", "/tools/memory_set", { key: "console", value: "hello" });
    await liveAttempts.getByText("delivered").first().waitFor();
    assertEquals(live.requests.map((r) => r.type), ["tool.called"]);
    await shot(page, "webhooks", true);
    await page.getByRole("button", { name: `Send test to ${live.url}` }).click();
    await page.getByText(/Test delivered: HTTP 204 in \d+ ms/).waitFor();
    assertEquals(live.requests.at(-1)?.type, "webhook.test");
    // Rotating asks first, saying when each signature header switches.
    await page.getByRole("button", { name: `Rotate secret of ${live.url}` }).click();
    await page.getByRole("heading", { name: "Rotate the signing secret" }).waitFor();
    assert(await page.getByRole("radio", { name: "24 hours (default)" }).isChecked());
    await page.getByText(/X-Service-Signature keeps the old secret until \d{4}-/).first().waitFor();
    await shot(page, "rotate-secret");
    await page.getByRole("button", { name: `Confirm rotating the secret of ${live.url}` }).click();
    assertMatch(await page.locator("#new-secret").textContent() ?? "", /^whsec_/);

    // The disabled webhook's event is a dead letter: enable it, replay, see it delivered.
    await page.getByRole("button", { name: `Enable ${late.url}` }).click();
    await page.getByText(`Enabled ${late.url}`).waitFor();
    await page.getByRole("link", { name: `Dead letters of ${late.url}` }).click();
    await page.getByRole("heading", { name: "Dead-letter queue" }).waitFor();
    await page.getByRole("link", { name: "tool.called" }).click();
    await page.getByLabel("Event payload").getByText('"memory_set"').first().waitFor();
    await shot(page, "dead-letter", true);
    await page.getByRole("button", { name: "Replay" }).click();
    await page.getByText("Replay: 1 queued for delivery").waitFor();
    await until(() => late.requests.length === 1, "the replayed delivery");
    await page.getByText("The dead-letter queue is empty.").waitFor();
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByRole("table", { name: `Recent attempts to ${late.url}` }).getByText("delivered")
      .first().waitFor();

    // A tool call from its page.
    await page.getByRole("link", { name: "Tools" }).click();
    await page.getByRole("link", { name: "memory_get" }).click();
    await page.getByLabel("Arguments (a JSON object)").fill('{"key": "console"}');
    await page.getByRole("button", { name: "Call memory_get" }).click();
    const result = await page.locator("#tool-result").textContent();
    assertMatch(result ?? "", /hello/);
    await shot(page, "tool");
    await page.getByLabel("Arguments (a JSON object)").fill("{not json");
    await page.getByRole("button", { name: "Call memory_get" }).click();
    await page.getByText("Invalid arguments: not JSON").waitFor();

    // The audit log, and its verify with progress.
    await page.getByRole("link", { name: "Audit log" }).click();
    await page.locator("tr.audit-entry").first().waitFor();
    await page.getByRole("button", { name: /Verify all \d+ entries/ }).click();
    await page.getByText(/Intact: \d+ entries verified/).waitFor();
    await page.getByLabel("Kind").selectOption("tool.call");
    await page.getByLabel("Tool", { exact: true }).fill("memory_get");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.locator("tr.audit-entry").first().waitFor();
    const tools = await page.locator("tr.audit-entry td:nth-child(4)").allTextContents();
    assert(tools.length > 0 && tools.every((t) => t === "memory_get"), tools.join());
    await page.getByLabel("Caller").fill("admin");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.locator("tr.audit-entry").first().waitFor();
    const callers = await page.locator("tr.audit-entry td:nth-child(5)").allTextContents();
    assert(callers.length > 0 && callers.every((c) => c === "admin"), callers.join());
    await shot(page, "audit", true);

    // A failed incoming payload, replayed: queued again (and refused again).
    const sent = await fetch(`${server.url}/hooks/refused`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ unexpected: true }),
    });
    assertEquals(sent.status, 202, await sent.text());
    await page.getByRole("link", { name: "Incoming" }).click();
    await page.getByRole("heading", { name: "Failed payloads (1)" }).waitFor();
    await page.locator("tr.failed-job").getByText("TOOL_INPUT_INVALID").waitFor();
    await shot(page, "incoming", true);
    const [before] = (await api("GET", "/incoming/failed")).jobs;
    await page.getByRole("button", { name: `Replay payload ${before.id}` }).click();
    await page.getByText("Replay: 1 failed payload queued").waitFor();
    // The handler runs again (and refuses it again): a new failure, shown live.
    await until(async () => {
      const { jobs } = await api("GET", "/incoming/failed");
      return jobs.length === 1 && jobs[0].failed_at !== before.failed_at;
    }, "the replayed payload's second failure");
    await page.getByRole("heading", { name: "Failed payloads (1)" }).waitFor();

    // Overview with the calls counted, and at a phone's width without sideways scrolling.
    await page.getByRole("link", { name: "Overview" }).click();
    await page.getByText(/\d+ calls in the last hour/).first().waitFor();
    // The chart says what it counts, with its scales.
    await page.getByText(/other instances on the same database are not included/).waitFor();
    await page.getByText("60 min ago").waitFor();
    await shot(page, "overview", true);
    await page.setViewportSize({ width: 390, height: 800 });
    // The same page again: measured once the new document has loaded, not while it replaces the old.
    await Promise.all([
      page.waitForEvent("load"),
      page.getByRole("link", { name: "Overview" }).click(),
    ]);
    const overflow = await page.evaluate<number>(
      "document.documentElement.scrollWidth - document.documentElement.clientWidth",
    );
    assertEquals(overflow, 0, "the page fits a phone's width");
    await shot(page, "overview-phone");
    // At that width tables stack their rows: every column shows (no sideways scroll inside a
    // table), each cell beside its column's name, and a date stays on one line.
    for (const link of ["Webhooks", "Audit log"]) {
      await Promise.all([
        page.waitForEvent("load"),
        page.getByRole("link", { name: link }).click(),
      ]);
      const hidden = await page.evaluate<number>(
        "[...document.querySelectorAll('.table')].filter((t) => t.scrollWidth > t.clientWidth + 1).length",
      );
      assertEquals(hidden, 0, `${link}: a table scrolls sideways at 390 px`);
      const labelled = await page.evaluate<number>(
        "document.querySelectorAll('.table td[data-label]').length",
      );
      assert(labelled > 0, `${link}: no cell names its column`);
      const wrapped = await page.evaluate<number>(
        "[...document.querySelectorAll('.table time')].filter((t) => t.getClientRects().length > 1).length",
      );
      assertEquals(wrapped, 0, `${link}: a date wraps`);
    }
    await shot(page, "webhooks-phone");

    // Keyboard: the first Tab reaches the skip link.
    await page.keyboard.press("Tab");
    assertEquals(
      await page.evaluate<string>("document.activeElement.textContent"),
      "Skip to content",
    );

    // A form without its CSRF token, or from another origin, is refused.
    const session = `toolgate_console=${cookie.value}`;
    const noCsrf = await fetch(`${server.url}/ui/dlq/replay`, {
      method: "POST",
      headers: { cookie: session, origin: server.url },
      body: new URLSearchParams({}),
    });
    assertEquals(noCsrf.status, 403, await noCsrf.text());

    // Sign out ends the session.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API token").waitFor();
    const after = await fetch(`${server.url}/ui`, {
      headers: { cookie: session },
      redirect: "manual",
    });
    await after.body?.cancel();
    assertEquals(after.status, 303);
    assertEquals(errors, []);
    await context.close();
  },
});
