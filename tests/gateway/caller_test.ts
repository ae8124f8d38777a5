import { assertEquals, assertThrows } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import {
  ADMIN_CALLER,
  auditCaller,
  LOCAL_CALLER,
  mayCall,
  parseToolPatterns,
} from "../../src/gateway/mod.ts";

Deno.test("mayCall: globs match whole names; * any run, ? one character, . and - literally", () => {
  const key = {
    kind: "key" as const,
    name: "ci",
    id: "key_1",
    tools: ["memory_*", "github__*", "http_request", "v?.get", "a.b-c"],
  };
  const allowed = ["memory_set", "memory_", "github__issues", "http_request", "v1.get", "a.b-c"];
  const refused = [
    "xmemory_set",
    "http_requests",
    "github_issues",
    "v10.get",
    "vx-get",
    "aXb-c",
    "a.b-cd",
  ];
  for (const tool of allowed) assertEquals(mayCall(key, tool), true, tool);
  for (const tool of refused) assertEquals(mayCall(key, tool), false, tool);
  assertEquals(mayCall({ kind: "key", tools: [] }, "echo"), false);
  assertEquals(mayCall({ kind: "key" }, "anything"), true, "a key without patterns: every tool");
  assertEquals(mayCall(ADMIN_CALLER, "anything"), true);
  assertEquals(mayCall(LOCAL_CALLER, "anything"), true);
  assertEquals(mayCall(undefined, "anything"), true);
});

Deno.test("parseToolPatterns: trims, drops empties, refuses what is not a name or glob", () => {
  assertEquals(parseToolPatterns(" memory_* , http_request ,"), ["memory_*", "http_request"]);
  for (const bad of ["", " , ", "rm -rf", "a/b", "x".repeat(129), "tool(1)"]) {
    const error = assertThrows(() => parseToolPatterns(bad), "--tools");
    assertEquals(error instanceof GatewayError && error.code, "USAGE", bad);
  }
});

Deno.test("auditCaller: kind, name, id and server only; never the patterns or rate", () => {
  assertEquals(
    auditCaller({ kind: "key", name: "ci", id: "key_1", tools: ["a*"], rate: "1/s", server: "s" }),
    { kind: "key", name: "ci", id: "key_1", server: "s" },
  );
  assertEquals(auditCaller(ADMIN_CALLER), { kind: "admin" });
});
