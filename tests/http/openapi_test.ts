import { Validator } from "@seriousme/openapi-schema-validator";
import { createRoute, z } from "@hono/zod-openapi";
import { assert, assertEquals } from "../_asserts.ts";
import { ErrorBodySchema } from "../../src/http/mod.ts";
import { VERSION } from "../../src/version.ts";
import { testApp } from "./_fixtures.ts";

type Operation = {
  responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
  security?: unknown[];
};
type Document = {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes?: Record<string, unknown> };
  security?: unknown[];
};

async function documentOf(response: Response): Promise<Document> {
  assertEquals(response.status, 200);
  return await response.json();
}

Deno.test("GET /openapi.json is a valid OpenAPI 3.1 document listing every route", async () => {
  await using t = await testApp();
  const doc = await documentOf(await t.app.request("/openapi.json"));
  const validator = new Validator();
  const result = await validator.validate(structuredClone(doc));
  assertEquals(result, { valid: true });
  assertEquals(validator.version, "3.1");
  assertEquals(doc.info.version, VERSION);
  const routes = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`)
  ).sort();
  assertEquals(routes, [
    "DELETE /mcp",
    "DELETE /mcp/{server}",
    "GET /health",
    "GET /health/live",
    "GET /health/ready",
    "GET /mcp",
    "GET /mcp/{server}",
    "GET /openapi.json",
    "GET /tools",
    "POST /mcp",
    "POST /mcp/{server}",
    "POST /tools/{name}",
  ]);
  // A virtual server's endpoint names its path parameter.
  const virtual = doc.paths["/mcp/{server}"].post as {
    parameters?: { name: string; in: string }[];
  };
  assertEquals(virtual.parameters?.map((p) => `${p.in} ${p.name}`).includes("path server"), true);
  assertEquals(doc.security, undefined, "no token configured: no security requirement");
});

Deno.test("GET /openapi.json describes every error status of POST /tools/{name}", async () => {
  await using t = await testApp();
  const doc = await documentOf(await t.app.request("/openapi.json"));
  const call = doc.paths["/tools/{name}"].post;
  const statuses = Object.keys(call.responses).sort();
  assertEquals(statuses, [
    "200",
    "202",
    "400",
    "401",
    "403",
    "404",
    "413",
    "415",
    "429",
    "499",
    "500",
    "502",
    "503",
    "504",
  ]);
  assertEquals(
    call.responses["202"].content?.["application/json"].schema.$ref,
    "#/components/schemas/PendingApproval",
  );
  for (const status of statuses.filter((s) => s !== "200" && s !== "202")) {
    assertEquals(
      call.responses[status].content?.["application/json"].schema.$ref,
      "#/components/schemas/ToolError",
      status,
    );
  }
  assert("Error" in doc.components.schemas && "ErrorObject" in doc.components.schemas);
  assert("ToolResult" in doc.components.schemas && "Health" in doc.components.schemas);
  assertEquals(doc.paths["/health"].get.security, []);
});

Deno.test("GET /openapi.json requires the bearer scheme when a token is set", async () => {
  await using t = await testApp({ env: { TOOLGATE_API_TOKEN: "tok" } });
  const doc = await documentOf(
    await t.app.request("/openapi.json", { headers: { authorization: "Bearer tok" } }),
  );
  assertEquals(doc.security, [{ bearerAuth: [] }]);
  assertEquals(doc.components.securitySchemes?.bearerAuth, {
    type: "http",
    scheme: "bearer",
    description: (doc.components.securitySchemes?.bearerAuth as { description: string })
      .description,
  });
});

Deno.test("routes mounted through the routes hook appear in /openapi.json", async () => {
  const auditRoute = createRoute({
    method: "get",
    path: "/audit",
    request: { query: z.object({ limit: z.coerce.number().int().min(1).optional() }) },
    responses: {
      200: {
        description: "Entries",
        content: { "application/json": { schema: z.object({ entries: z.array(z.unknown()) }) } },
      },
      400: {
        description: "Bad query",
        content: { "application/json": { schema: ErrorBodySchema } },
      },
    },
  });
  await using t = await testApp({
    routes: [(app) => app.openapi(auditRoute, (c) => c.json({ entries: [] }, 200))],
  });
  const doc = await documentOf(await t.app.request("/openapi.json"));
  assert(doc.paths["/audit"]?.get, "GET /audit is listed");
  assertEquals(await new Validator().validate(structuredClone(doc)), { valid: true });
  const ok = await t.app.request("/audit?limit=2");
  assertEquals(await ok.json(), { entries: [] });
  const bad = await t.app.request("/audit?limit=0");
  assertEquals(bad.status, 400);
  assertEquals((await bad.json()).error.code, "USAGE");
});
