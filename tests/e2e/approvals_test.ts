/**
 * Approvals end to end on the real server: a call held for another's
 * approval (REST 202, `?wait=`, the CLI and REST deciding, the runner
 * running an approved call nobody waits for, its result kept), changed
 * arguments needing a new approval, denial, expiry, who may decide, and the
 * caller confirming its own call by elicitation with the official 2025 and
 * 2026-07-28 clients. Every step is in the audit log, linked by the id.
 */
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernHttpTransport,
} from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdioTransport } from "@modelcontextprotocol/client/stdio";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome, toolgateStdio, until } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";
import { startPostgres } from "../_postgres.ts";
import { startFakeSlack } from "../plugins/_fake_slack.ts";
import { createHmac } from "node:crypto";
import { Receiver } from "../webhooks/_receiver.ts";
import { OPT_IN_EVENT_DATA_SCHEMAS } from "../../src/events/mod.ts";

const ADMIN = "admin-token-approvals-e2e";
/** The data key both instances on one database share (base64 of 32 bytes). */
const SECRET_KEY = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));

const POLICIES = [
  {
    name: "ask-deletes",
    tools: ["memory_delete"],
    effect: "require_approval",
    approvers: ["key:lead"],
    reason: "notes are shared",
  },
  {
    name: "quick-expiry",
    tools: ["memory_list"],
    effect: "require_approval",
    approvers: ["admin"],
    timeout: "1s",
  },
];

// deno-lint-ignore no-explicit-any
type Json = Record<string, any>;

async function post(url: string, token: string, body: unknown = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() as Json };
}

async function get(url: string, token: string) {
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, body: await response.json() as Json };
}

Deno.test("a call held for another's approval: 202, decided by CLI and REST, run once, bound to its arguments", async () => {
  await using tmp = await tempHome();
  const { home } = tmp;
  const env = { TOOLGATE_API_TOKEN: ADMIN };
  await using server = await startHttpServer({
    home,
    env,
    config: { policies: POLICIES, plugins: { upstream_settings: { poll_ms: 50 } } },
  });
  const { url } = server;
  const key = async (name: string) =>
    (await runCli(["keys", "create", "--name", name], { home, env })).stdout.trim();
  const ci = await key("ci");
  const lead = await key("lead");
  const other = await key("other");
  // One webhook gets the 8 default types, one names the opt-in approval events.
  await using everything = new Receiver();
  await using optIn = new Receiver();
  assertEquals(
    (await post(`${url}/webhooks`, ADMIN, { url: everything.url, secret: null })).status,
    201,
  );
  assertEquals(
    (await post(`${url}/webhooks`, ADMIN, {
      url: optIn.url,
      secret: null,
      events: ["approval.requested", "approval.decided"],
    })).status,
    201,
  );
  // The server notices new webhooks within webhooks.poll_ms: events before that are not theirs.
  await new Promise((r) => setTimeout(r, 1000));
  await post(`${url}/tools/memory_set`, ci, { key: "k", value: 1 });

  // Held: 202 with where a person decides.
  const held = await post(`${url}/tools/memory_delete`, ci, { key: "k" });
  assertEquals(held.status, 202);
  const { id, status, url: where } = held.body.approval;
  assertEquals([status, where], ["pending", `/approvals/${id}`]);
  assertEquals((await get(`${url}${where}`, ci)).body.status, "pending");
  // Another key is neither approver nor caller: the approval does not exist for it.
  assertEquals((await post(`${url}${where}/approve`, other)).status, 404);
  assertEquals((await get(`${url}${where}`, other)).status, 404);

  const listed = await runCli(["approvals", "list", "--status", "pending"], { home, env });
  assertStringIncludes(listed.stdout, id);
  assertStringIncludes(listed.stdout, "memory_delete");
  const approved = await runCli(["approvals", "approve", id, "--reason", "cleanup"], { home, env });
  assertEquals(approved.code, 0, approved.stderr);
  // Nobody waits for it: the server's runner runs it, once, and keeps the result.
  await until(
    async () => (await get(`${url}${where}`, ci)).body.result !== null,
    "the run",
    15_000,
  );
  const done = (await get(`${url}${where}`, ci)).body;
  assertEquals([done.status, done.decided_by, done.decision_reason], [
    "approved",
    "admin",
    "cleanup",
  ]);
  assertEquals(done.result.ok, true);
  assertEquals(done.result.output, { key: "k", deleted: true });
  assertEquals((await runCli(["approvals", "approve", id], { home, env })).code, 1);

  // Waiting with ?wait: approved by the lead key over REST meanwhile, the same request runs it.
  await post(`${url}/tools/memory_set`, ci, { key: "k2", value: 2 });
  const waiting = post(`${url}/tools/memory_delete?wait=20`, ci, { key: "k2" });
  let pending: { id: string } | undefined;
  await until(async () => {
    pending = (await get(`${url}/approvals?status=pending`, lead)).body.approvals[0];
    return pending !== undefined;
  }, "the second approval");
  const decided = await post(`${url}/approvals/${pending!.id}/approve`, lead, { reason: "ok" });
  assertEquals(decided.status, 200);
  assert(String(decided.body.decided_by).startsWith("key:"), decided.body.decided_by);
  const answered = await waiting;
  assertEquals(answered.status, 200);
  assertEquals(answered.body.structuredContent?.deleted ?? answered.body.output?.deleted, true);

  // Other arguments are another call: a new approval; a denial ends the wait.
  const denying = post(`${url}/tools/memory_delete?wait=20`, ci, { key: "other-key" });
  let third: { id: string; args: Record<string, unknown> } | undefined;
  await until(async () => {
    third = (await get(`${url}/approvals?status=pending`, lead)).body.approvals[0];
    return third !== undefined;
  }, "the third approval");
  assert(third!.id !== pending!.id);
  assertEquals(third!.args, { key: "other-key" });
  const deniedNow = await post(`${url}/approvals/${third!.id}/deny`, lead, { reason: "keep it" });
  assertEquals(deniedNow.status, 200, JSON.stringify(deniedNow.body));
  const refused = await denying;
  assertEquals(refused.status, 403);
  assertEquals(refused.body.error.code, "APPROVAL_DENIED");
  assertStringIncludes(refused.body.error.message, "keep it");

  // Nobody decides in time.
  const late = await post(`${url}/tools/memory_list?wait=5`, ci, {});
  assertEquals(late.status, 403);
  assertEquals(late.body.error.code, "APPROVAL_EXPIRED");

  // Requests, decisions, expiry and the calls that ran, linked by the approval id.
  const audit = (await get(`${url}/audit?limit=1000`, ADMIN)).body.entries as {
    kind: string;
    input: Record<string, unknown>;
    outcome: Record<string, unknown>;
  }[];
  const about = (approval: string) =>
    audit.filter((e) => e.input?.approval_id === approval || e.outcome?.approval_id === approval)
      .map((e) => e.kind);
  assertEquals(about(id), ["approval.requested", "approval.decided", "tool.call"]);
  assertEquals(about(third!.id), ["approval.requested", "approval.decided", "tool.call"]);
  assert(audit.some((e) => e.kind === "approval.expired"));

  // The opt-in events went only to the webhook that named them, as their schemas say.
  const typesOf = (receiver: Receiver) =>
    receiver.requests.map((r) => JSON.parse(new TextDecoder().decode(r.body)) as Json);
  // Each request and decision (the CLI's too: recorded for the server to send), to the webhook
  // that named them only, as their schemas say.
  await until(() => typesOf(optIn).length >= 7, "the approval events", 30_000);
  const events = typesOf(optIn);
  assertEquals(events.map((e) => e.type), [
    "approval.requested",
    "approval.decided",
    "approval.requested",
    "approval.decided",
    "approval.requested",
    "approval.decided",
    "approval.requested",
  ]);
  for (const event of events) {
    const schema = OPT_IN_EVENT_DATA_SCHEMAS[event.type as "approval.requested"];
    assert(schema.safeParse(event.data).success, JSON.stringify(event));
  }
  assertEquals([events[0].data.approval_id, events[0].data.url], [id, `/approvals/${id}`]);
  assertEquals([events[1].data.decided_by, events[1].data.reason], ["admin", "cleanup"]);
  assertEquals(events[5].data.status, "denied");
  assert(!typesOf(everything).some((e) => String(e.type).startsWith("approval.")));
  assert(typesOf(everything).some((e) => e.type === "tool.called"));
  await server.stop();
});

Deno.test("the caller confirms its own call by elicitation: the 2025 and the 2026-07-28 client", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({
      policies: [{
        name: "confirm-sets",
        tools: ["memory_set"],
        effect: "require_approval",
        approver: "caller",
        reason: "writes are kept",
      }],
    }),
  );
  let asked = "";
  const answer = (params: { message?: string }, approve: boolean) => {
    asked = params.message ?? "";
    return { action: "accept" as const, content: { approve } };
  };
  for (const era of ["2025", "2026"]) {
    for (const approve of [true, false]) {
      let client: Client | ModernClient;
      if (era === "2025") {
        const legacy = new Client({ name: "legacy", version: "1.0.0" }, {
          capabilities: { elicitation: {} },
        });
        legacy.setRequestHandler(
          ElicitRequestSchema,
          (request: { params: Record<string, unknown> }) => answer(request.params, approve),
        );
        await legacy.connect(new StdioClientTransport(toolgateStdio(tmp.home)));
        client = legacy;
      } else {
        const modern = new ModernClient({ name: "modern", version: "1.0.0" }, {
          capabilities: { elicitation: {} },
          versionNegotiation: { mode: "auto" },
        });
        modern.setRequestHandler(
          "elicitation/create",
          (request) => answer(request.params as never, approve) as never,
        );
        await modern.connect(new ModernStdioTransport(toolgateStdio(tmp.home)) as never);
        client = modern;
      }
      try {
        const result = await client.callTool({
          name: "memory_set",
          arguments: { key: `${era}-${approve}`, value: 1 },
        });
        const text = JSON.stringify(result.content);
        assertStringIncludes(asked, "Run memory_set with");
        assertStringIncludes(asked, "writes are kept");
        if (approve) assert(!result.isError, `${era}: ${text}`);
        else {
          assertEquals(result.isError, true, `${era}: ${text}`);
          assertStringIncludes(text, "APPROVAL_DENIED");
        }
      } finally {
        await client.close();
      }
    }
  }
  // A client that cannot be asked gets APPROVAL_REQUIRED with where a person decides.
  const plain = new Client({ name: "plain", version: "1.0.0" });
  await plain.connect(new StdioClientTransport(toolgateStdio(tmp.home)));
  try {
    const result = await plain.callTool({ name: "memory_set", arguments: { key: "x", value: 1 } });
    assertEquals(result.isError, true);
    assertStringIncludes(JSON.stringify(result.content), "APPROVAL_REQUIRED");
    assertStringIncludes(JSON.stringify(result.content), "/approvals/apr_");
  } finally {
    await plain.close();
  }
});

Deno.test("a held call survives kill -9 of its instance and is approved and run on another (PostgreSQL)", async () => {
  await using pg = await startPostgres();
  await using homeA = await tempHome();
  await using homeB = await tempHome();
  const env = {
    TOOLGATE_DATABASE_URL: pg.url,
    TOOLGATE_SECRET_KEY: SECRET_KEY,
    TOOLGATE_API_TOKEN: ADMIN,
  };
  const config = {
    policies: [{
      name: "ask-sets",
      tools: ["memory_set"],
      effect: "require_approval",
      approvers: ["admin"],
    }],
    plugins: { upstream_settings: { poll_ms: 50 } },
  };
  const a = await startHttpServer({ home: homeA.home, env, config });
  await using b = await startHttpServer({ home: homeB.home, env, config });
  // The caller waits on A; A dies with the call held.
  const waiting = post(`${a.url}/tools/memory_set?wait=60`, ADMIN, { key: "survivor", value: 42 })
    .catch((error) => error);
  let id = "";
  await until(async () => {
    const pending = (await get(`${b.url}/approvals?status=pending`, ADMIN)).body.approvals;
    id = pending[0]?.id ?? "";
    return id !== "";
  }, "the held call, seen from B");
  await a.stop("SIGKILL");
  assert((await waiting) instanceof Error, "the request on the killed instance fails");

  // Approved on B: B's runner runs it (nobody waits for it any more), once.
  assertEquals(
    (await post(`${b.url}/approvals/${id}/approve`, ADMIN, { reason: "go" })).status,
    200,
  );
  await until(
    async () => (await get(`${b.url}/approvals/${id}`, ADMIN)).body.result !== null,
    "the run",
    20_000,
  );
  const done = (await get(`${b.url}/approvals/${id}`, ADMIN)).body;
  assertEquals([done.status, done.result.ok], ["approved", true]);
  const read = await post(`${b.url}/tools/memory_get`, ADMIN, { key: "survivor" });
  assertEquals(read.body.structuredContent?.value ?? read.body.output?.value, 42);
  const entries = (await get(`${b.url}/audit?limit=1000`, ADMIN)).body.entries as Json[];
  assertEquals(
    entries.filter((e) => e.input?.approval_id === id || e.outcome?.approval_id === id).map((e) =>
      e.kind
    ),
    ["approval.requested", "approval.decided", "tool.call"],
  );
  await b.stop();
});

Deno.test("Slack: a held call is posted with buttons; a signed click on the incoming endpoint decides it", async () => {
  await using tmp = await tempHome();
  const { home } = tmp;
  await using slack = startFakeSlack("xoxb-approvals-e2e");
  const signing = "slack-signing-secret";
  const env = {
    TOOLGATE_API_TOKEN: ADMIN,
    TOOLGATE_SLACK_API_URL: slack.url,
    TOOLGATE_SECRET_SLACK_BOT_TOKEN: "xoxb-approvals-e2e",
  };
  const created = await runCli([
    "webhooks",
    "create",
    "--name",
    "slack-actions",
    "--path",
    "/hooks/slack",
    "--handler",
    "approvals_decide",
    "--verify",
    "slack",
    "--secret",
    signing,
  ], { home, env });
  assertEquals(created.code, 0, created.stderr);
  await using server = await startHttpServer({
    home,
    env,
    config: {
      approvals: { slack_channel: "#approvals" },
      policies: [{
        name: "deploys",
        tools: ["memory_delete"],
        effect: "require_approval",
        approvers: ["slack:U0LEAD"],
        reason: "production data",
      }],
      plugins: { upstream_settings: { poll_ms: 50 } },
    },
  });
  const { url } = server;
  const held = await post(`${url}/tools/memory_delete`, ADMIN, { key: "k" });
  assertEquals(held.status, 202);
  const id = held.body.approval.id as string;
  await until(() => slack.requests.some((r) => r.path.endsWith("/chat.postMessage")), "the post");
  const message = slack.requests.find((r) => r.path.endsWith("/chat.postMessage"))!.body as Json;
  assertEquals(message.channel, "#approvals");
  assertStringIncludes(message.text, "Approval needed: memory_delete");
  const buttons = message.blocks[1].elements.map((e: Json) => [e.action_id, e.value]);
  assertEquals(buttons, [["approve", id], ["deny", id]]);

  const click = async (user: string, action: string, secret = signing) => {
    const body = `payload=${
      encodeURIComponent(JSON.stringify({
        type: "block_actions",
        user: { id: user, username: user.toLowerCase() },
        actions: [{ action_id: action, value: id }],
      }))
    }`;
    const timestamp = Math.floor(Date.now() / 1000);
    const response = await fetch(`${url}/hooks/slack?wait=true`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": String(timestamp),
        "X-Slack-Signature": "v0=" +
          createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex"),
      },
      body,
    });
    return { status: response.status, body: await response.json() as Json };
  };
  // A forged click is refused by the signature check; another Slack user may not decide.
  assertEquals((await click("U0LEAD", "approve", "wrong")).status, 401);
  const stranger = await click("U0OTHER", "approve");
  assertStringIncludes(JSON.stringify(stranger.body), "FORBIDDEN");
  assertEquals((await get(`${url}/approvals/${id}`, ADMIN)).body.status, "pending");
  const lead = await click("U0LEAD", "approve");
  assertEquals(lead.status, 200, JSON.stringify(lead.body));
  const decided = (await get(`${url}/approvals/${id}`, ADMIN)).body;
  assertEquals([decided.status, decided.decided_by], ["approved", "slack:U0LEAD"]);
  // approvals_decide is for signed interactions only: a REST caller cannot use it.
  const direct = await post(`${url}/tools/approvals_decide`, ADMIN, {
    type: "block_actions",
    user: { id: "U0LEAD" },
    actions: [{ action_id: "deny", value: id }],
  });
  assertEquals(direct.status, 403);
  await server.stop();
});

Deno.test("a 2026-07-28 client waiting for someone else's approval is sent its page (URL elicitation) until decided", async () => {
  await using tmp = await tempHome();
  const env = { TOOLGATE_API_TOKEN: ADMIN };
  await using server = await startHttpServer({
    home: tmp.home,
    env,
    config: {
      policies: [{
        name: "ask",
        tools: ["memory_set"],
        effect: "require_approval",
        approvers: ["admin"],
      }],
    },
  });
  const { url } = server;
  const pages: string[] = [];
  const client = new ModernClient({ name: "modern-http", version: "1.0.0" }, {
    capabilities: { elicitation: { form: {}, url: {} } },
    versionNegotiation: { mode: "auto" },
  });
  client.setRequestHandler("elicitation/create", async (request) => {
    const params = request.params as { mode?: string; url?: string };
    pages.push(`${params.mode} ${params.url}`);
    // The person at the page: the first time they look, the second time they approve.
    if (pages.length === 2) {
      const id = params.url!.slice(params.url!.lastIndexOf("/") + 1);
      const decided = await post(`${url}/approvals/${id}/approve`, ADMIN, {});
      assertEquals(decided.status, 200);
    }
    return { action: "accept" } as never;
  });
  await client.connect(
    new ModernHttpTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${ADMIN}` } },
    }) as never,
  );
  try {
    const result = await client.callTool({ name: "memory_set", arguments: { key: "k", value: 1 } });
    assert(!result.isError, JSON.stringify(result.content));
    assertEquals(pages.length, 2);
    assert(pages.every((p) => p.startsWith(`url ${url}/ui/approvals/apr_`)), pages.join());
  } finally {
    await client.close();
  }
  await server.stop();
});
