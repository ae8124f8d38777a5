import { GatewayError } from "../../src/errors/mod.ts";
import type { AskCaller, InputRequest } from "../../src/gateway/mod.ts";
import { InputRelay } from "../../src/mcp/input_relay.ts";
import { assert, assertEquals, assertRejects } from "../_asserts.ts";

const ELICIT: InputRequest = { method: "elicitation/create", params: { message: "Name?" } };
const SAMPLE: InputRequest = { method: "sampling/createMessage", params: { maxTokens: 5 } };
const anyMethod = () => true;
const signal = () => new AbortController().signal;

/** A call that asks `requests` once and returns the answers it got. */
function askingOnce(requests: Record<string, InputRequest>) {
  return async (ask: AskCaller, callSignal: AbortSignal) =>
    await ask(requests, callSignal) as Record<string, unknown>;
}

Deno.test("a call that asks is parked; the answer resumes it and its result comes back", async () => {
  const relay = new InputRelay();
  const first = await relay.start("t", anyMethod, {}, askingOnce({ a: ELICIT }), signal());
  assert(first.kind === "input");
  assertEquals(first.requests, { a: ELICIT });
  assertEquals(relay.parked, 1);
  const done = await relay.resume(first.state, "t", { a: { action: "decline" } }, {}, signal());
  assertEquals(done, { kind: "done", value: { a: { action: "decline" } } });
  assertEquals(relay.parked, 0);
});

Deno.test("answers for only some requests: the others are asked again, under a new state", async () => {
  const relay = new InputRelay();
  const first = await relay.start(
    "t",
    anyMethod,
    {},
    askingOnce({ a: ELICIT, b: SAMPLE }),
    signal(),
  );
  assert(first.kind === "input");
  const again = await relay.resume(first.state, "t", { a: { action: "decline" } }, {}, signal());
  assert(again.kind === "input");
  assertEquals(again.requests, { a: ELICIT, b: SAMPLE });
  assertEquals(again.state.round, first.state.round + 1);
  // The earlier round's state is spent.
  await assertRejects(() => relay.resume(first.state, "t", {}, {}, signal()), GatewayError);
  const done = await relay.resume(again.state, "t", { a: 1, b: 2 }, {}, signal());
  assertEquals(done, { kind: "done", value: { a: 1, b: 2 } });
});

Deno.test("a caller that never answers: the call is cancelled after the answer timeout", async () => {
  const relay = new InputRelay({ answerTimeoutMs: 50 });
  let reason: unknown;
  const first = await relay.start("t", anyMethod, {}, async (ask, callSignal) => {
    try {
      return await ask({ a: ELICIT }, callSignal);
    } catch (error) {
      reason = error;
      throw error;
    }
  }, signal());
  assert(first.kind === "input");
  await new Promise((resolve) => setTimeout(resolve, 120));
  assert(reason instanceof GatewayError);
  assertEquals(reason.code, "CANCELLED");
  assertEquals(relay.parked, 0);
  const late = await assertRejects(
    () => relay.resume(first.state, "t", { a: 1 }, {}, signal()),
    GatewayError,
  );
  assertEquals(late.code, "NOT_FOUND");
});

Deno.test("a request for a method the client did not declare fails at once and parks nothing", async () => {
  const relay = new InputRelay();
  const onlySampling = (method: string) => method === "sampling/createMessage";
  const error = await assertRejects(
    () => relay.start("t", onlySampling, {}, askingOnce({ a: ELICIT }), signal()),
    GatewayError,
  );
  assertEquals(error.code, "PLUGIN_REQUEST_FAILED");
  assertEquals(relay.parked, 0);
});

Deno.test("the request going away cancels the call it started; close cancels parked calls", async () => {
  const relay = new InputRelay();
  const request = new AbortController();
  let cancelled = false;
  const running = relay.start(
    "t",
    anyMethod,
    {},
    (_ask, callSignal) =>
      new Promise((_, reject) =>
        callSignal.addEventListener("abort", () => {
          cancelled = true;
          reject(callSignal.reason);
        })
      ),
    request.signal,
  );
  request.abort(new GatewayError("CANCELLED", "gone"));
  await assertRejects(() => running, GatewayError);
  assert(cancelled);

  const parked = await relay.start("t", anyMethod, {}, askingOnce({ a: ELICIT }), signal());
  assert(parked.kind === "input");
  relay.close();
  assertEquals(relay.parked, 0);
});

Deno.test("progress and log messages of a resumed call go to the request that resumed it", async () => {
  const relay = new InputRelay();
  const seen: string[] = [];
  const first = await relay.start<string, string>(
    "t",
    anyMethod,
    "first",
    async (ask, callSignal, route) => {
      seen.push(route());
      await ask({ a: ELICIT }, callSignal);
      seen.push(route());
      return "ok";
    },
    signal(),
  );
  assert(first.kind === "input");
  await relay.resume(first.state, "t", { a: 1 }, "second", signal());
  assertEquals(seen, ["first", "second"]);
});
