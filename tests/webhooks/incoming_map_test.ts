import { assertEquals, assertThrows } from "../_asserts.ts";
import {
  IncomingMapping,
  parseCondition,
  parseHeaderEntry,
  parseMapEntry,
  parseSource,
  validateMapping,
} from "../../src/webhooks/mod.ts";

const ISSUE = {
  action: "opened",
  number: 7,
  issue: { html_url: "https://github.com/o/r/issues/7", title: "Crash", labels: [{ name: "bug" }] },
  "a/b": { "m~n": 1 },
};

Deno.test("parseSource() reads RFC 6901 pointers (~1, ~0, the whole payload) and header:<Name>", () => {
  assertEquals(parseSource("/issue/title", "--map"), { pointer: ["issue", "title"] });
  assertEquals(parseSource("/a~1b/m~0n", "--map"), { pointer: ["a/b", "m~n"] });
  assertEquals(parseSource("", "--map"), { pointer: [] });
  assertEquals(parseSource("header:X-GitHub-Event", "--map"), { header: "x-github-event" });
  assertThrows(() => parseSource("issue/title", "--map"), "expected a JSON Pointer");
  assertThrows(() => parseSource("/a~2", "--map"), '"~" must be written ~0');
  assertThrows(() => parseSource("header:bad name", "--when"), "is not a header name");
});

Deno.test("--map, --header and --when entries parse or name what is wrong", () => {
  assertEquals(parseMapEntry("key=/issue/html_url"), ["key", "/issue/html_url"]);
  assertEquals(parseHeaderEntry("X-GitHub-Event"), ["x_github_event", "header:X-GitHub-Event"]);
  assertEquals(parseHeaderEntry("X-GitHub-Delivery=delivery"), [
    "delivery",
    "header:X-GitHub-Delivery",
  ]);
  assertEquals(parseCondition("/action=opened").op, "eq");
  assertEquals(parseCondition("/action!=closed").op, "ne");
  assertEquals(parseCondition("/issue").op, "exists");
  assertEquals(parseCondition("/title=a=b").value, "a=b");
  assertThrows(() => parseMapEntry("/issue/title"), "expected <argument>=<source>");
  assertThrows(() => parseMapEntry("9x=/a"), "expected <argument>=<source>");
  assertThrows(() => validateMapping({ routes: { push: "x" } }), "give --route-by");
  assertThrows(() => validateMapping({ route_by: "/action" }), "at least one --route");
});

Deno.test("a mapping builds the arguments from pointers and headers; missing values are left out", () => {
  const mapping = new IncomingMapping({
    map: {
      key: "/issue/html_url",
      value: "/issue/title",
      label: "/issue/labels/0/name",
      event: "header:X-GitHub-Event",
      missing: "/issue/assignee",
      odd: "/a~1b/m~0n",
      whole: "",
    },
  }, "memory_set");
  const headers = new Headers({ "X-GitHub-Event": "issues" });
  assertEquals(mapping.apply(ISSUE, headers), {
    handler: "memory_set",
    args: {
      key: "https://github.com/o/r/issues/7",
      value: "Crash",
      label: "bug",
      event: "issues",
      odd: 1,
      whole: ISSUE,
    },
  });
});

Deno.test("--when skips payloads that do not match; --route picks the handler; no mapping passes the payload", () => {
  const headers = new Headers({ "X-GitHub-Event": "issues" });
  const filtered = new IncomingMapping(
    { when: ["/action=opened", "header:X-GitHub-Event!=ping"] },
    "h",
  );
  assertEquals(filtered.apply(ISSUE, headers), { handler: "h", args: ISSUE });
  assertEquals(filtered.apply({ ...ISSUE, action: "closed" }, headers), {
    skip: "--when /action=opened does not hold",
  });
  assertEquals(
    filtered.apply(ISSUE, new Headers({ "X-GitHub-Event": "ping" })),
    { skip: "--when header:X-GitHub-Event!=ping does not hold" },
  );
  const numbers = new IncomingMapping({ when: ["/number=7", "/issue"] }, "h");
  assertEquals("skip" in numbers.apply(ISSUE, headers), false, "numbers compare as JSON text");
  assertEquals(numbers.apply({ number: 7 }, headers), { skip: "--when /issue does not hold" });
  const routed = new IncomingMapping({
    route_by: "header:X-GitHub-Event",
    routes: { issues: "track_issue", push: "deploy" },
  }, "fallback");
  assertEquals(routed.apply(ISSUE, headers), { handler: "track_issue", args: ISSUE });
  assertEquals(
    routed.apply(ISSUE, new Headers({ "X-GitHub-Event": "push" })),
    { handler: "deploy", args: ISSUE },
  );
  assertEquals(routed.apply(ISSUE, new Headers()), { handler: "fallback", args: ISSUE });
  const plain = new IncomingMapping({}, "memory_set");
  const payload = { key: "k", value: 1 };
  assertEquals(plain.apply(payload, headers).valueOf(), { handler: "memory_set", args: payload });
});
