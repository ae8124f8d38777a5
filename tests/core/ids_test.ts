import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { newId, ulid } from "../../src/ids.ts";

Deno.test("ulid() made in one millisecond sort in the order they were made", () => {
  const now = Date.parse("2026-11-27T10:00:00Z");
  const ids = Array.from({ length: 2000 }, () => ulid(now));
  assertEquals([...ids].sort(), ids);
  assertEquals(new Set(ids).size, ids.length);
  const later = ulid(now + 1);
  assert(later > ids.at(-1)!, "a later millisecond sorts after");
  assertMatch(newId("wh"), /^wh_[0-9a-z]{26}$/);
});

Deno.test("ulid() tails are random across milliseconds", () => {
  const now = Date.parse("2026-11-27T10:00:00Z");
  const tails = new Set(Array.from({ length: 50 }, (_, i) => ulid(now + 2 * i).slice(10)));
  assertEquals(tails.size, 50);
});
