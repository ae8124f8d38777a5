/**
 * docs/outgoing-webhooks.md shows the JSON Schema of each opt-in event
 * type's `data`: the ones toolgate checks, so the docs cannot drift.
 */
import { z } from "zod";
import { assertEquals } from "../_asserts.ts";
import { OPT_IN_EVENT_DATA_SCHEMAS } from "../../src/events/mod.ts";
import { ROOT } from "../_helpers.ts";

Deno.test("the documented JSON Schemas of the opt-in event types are the ones toolgate checks", async () => {
  const text = await Deno.readTextFile(`${ROOT}docs/outgoing-webhooks.md`);
  for (const [type, schema] of Object.entries(OPT_IN_EVENT_DATA_SCHEMAS)) {
    const at = text.indexOf(`#### \`${type}\``);
    const start = text.indexOf("```json\n", at) + "```json\n".length;
    const documented = JSON.parse(text.slice(start, text.indexOf("```", start)));
    const actual = z.toJSONSchema(schema as z.ZodType) as Record<string, unknown>;
    delete actual.$schema;
    assertEquals(documented, actual, type);
  }
});
