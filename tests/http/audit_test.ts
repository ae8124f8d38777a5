import { createAuditLog } from "../../src/audit/mod.ts";
import { auditRoutes } from "../../src/http/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { assertEquals } from "../_asserts.ts";
import { testApp } from "./_fixtures.ts";

Deno.test("GET /audit?kind= filters by a known kind and refuses another with 400 USAGE naming the kinds", async () => {
  const store = await openStore({ dataDir: "(memory)", memory: true });
  const audit = createAuditLog({ store });
  try {
    await audit.append({
      kind: "tool.call",
      tool: "echo",
      input: {},
      outcome: { ok: true, latency_ms: 1 },
    });
    await using t = await testApp({ routes: [auditRoutes(audit)] });
    const known = await t.app.request("/audit?kind=tool.call");
    assertEquals(known.status, 200);
    assertEquals((await known.json()).entries.length, 1);
    const none = await t.app.request("/audit?kind=webhook.incoming");
    assertEquals((await none.json()).entries.length, 0);
    const bad = await t.app.request("/audit?kind=tool.calls");
    assertEquals(bad.status, 400);
    const body = await bad.json();
    assertEquals(body.error.code, "USAGE");
    assertEquals(body.error.details.fields, [{
      path: "kind",
      message:
        "expected one of tool.call, webhook.incoming, prompt.get, resource.read, audit.pruned, pin.created, pin.changed, pin.approved, pin.rejected, approval.requested, approval.decided, approval.expired",
    }]);
  } finally {
    await audit.close();
    store.close();
  }
});
