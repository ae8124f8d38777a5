/**
 * The tracing functions with tracing off (no `OTEL_DENO`), as every test
 * process and most servers run: no-ops that change nothing. With tracing on
 * they are tested against a real exporting server in `tests/e2e/tracing_test.ts`.
 *
 * @module
 */
import { assertEquals, assertRejects } from "../_asserts.ts";
import {
  activeTraceparent,
  traceCarrierOf,
  traced,
  traceHeaders,
  untraced,
} from "../../src/tracing/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";

const TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

Deno.test("traceCarrierOf() takes SEP-414's keys from _meta and nothing without a traceparent", () => {
  assertEquals(
    traceCarrierOf({
      traceparent: TRACEPARENT,
      tracestate: "a=1",
      baggage: "k=v",
      progressToken: 1,
    }),
    { traceparent: TRACEPARENT, tracestate: "a=1", baggage: "k=v" },
  );
  assertEquals(traceCarrierOf({ traceparent: TRACEPARENT, tracestate: 7 }), {
    traceparent: TRACEPARENT,
  });
  assertEquals(traceCarrierOf({ tracestate: "a=1" }), undefined);
  assertEquals(traceCarrierOf({ traceparent: 42 }), undefined);
  assertEquals(traceCarrierOf(undefined), undefined);
  assertEquals(traceCarrierOf("00-…"), undefined);
});

Deno.test("with tracing off, traced() runs its function, passes its result and its error through", async () => {
  const seen: (string | undefined)[] = [];
  const value = await traced("outer", { parent: TRACEPARENT, attributes: { a: 1 } }, (span) => {
    span.set({ b: "x", c: undefined });
    seen.push(span.traceparent(), activeTraceparent());
    return Promise.resolve(42);
  });
  assertEquals(value, 42);
  assertEquals(seen, [undefined, undefined]);
  const error = new GatewayError("TOOL_TIMEOUT", "Tool echo timed out after 5 ms");
  const thrown = await assertRejects(() =>
    traced("failing", { root: true }, () => Promise.reject(error))
  );
  assertEquals(thrown, error);
  assertEquals(traceHeaders(), {});
  assertEquals(untraced(() => "ran"), "ran");
});
