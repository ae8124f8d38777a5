import { assertEquals, assertThrows } from "../_asserts.ts";
import { until } from "../_helpers.ts";
import { DeadlineQueue } from "../../src/deadlines.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("DeadlineQueue: expires what is still pending after ms, in the order added, and nothing cancelled", async () => {
  let now = 0;
  const queue = new DeadlineQueue(40, { now: () => now });
  const expired: string[] = [];
  queue.add(() => expired.push("a"));
  const cancelB = queue.add(() => expired.push("b"));
  now = 15;
  queue.add(() => expired.push("c"));
  cancelB();
  cancelB(); // twice is harmless
  assertEquals(queue.size, 2);
  now = 50; // a is due (40), c is not (55)
  await until(() => expired.length > 0, "a to expire");
  await sleep(20); // the timer re-armed for c and fired again: c is still not due
  assertEquals(expired, ["a"]);
  assertEquals(queue.size, 1);
  now = 55;
  await until(() => expired.length > 1, "c to expire");
  assertEquals(expired, ["a", "c"]);
  assertEquals(queue.size, 0);
});

Deno.test("DeadlineQueue: an operation added after the first one finished still gets its whole time", async () => {
  let now = 0;
  const queue = new DeadlineQueue(100, { now: () => now });
  const expired: number[] = [];
  const cancel = queue.add(() => expired.push(1));
  cancel();
  now = 90;
  queue.add(() => expired.push(2)); // due at 190, though the timer was armed for 100
  await sleep(150); // the timer fires (its 100 ms), finds nothing due at now = 90, re-arms
  now = 189;
  await sleep(50); // whenever it fires now, 2 is still 1 ms from due
  assertEquals(expired, []);
  now = 190;
  await until(() => expired.length > 0, "2 to expire");
  assertEquals(expired, [2]);
});

Deno.test("DeadlineQueue: a cancel after expiry does nothing; ms must be a finite number ≥ 0", async () => {
  const queue = new DeadlineQueue(0);
  let fired = 0;
  const cancel = queue.add(() => fired++);
  await until(() => fired > 0, "the 0 ms timeout");
  cancel();
  assertEquals(fired, 1);
  assertThrows(() => new DeadlineQueue(-1), "ms must be a finite number ≥ 0");
  assertThrows(() => new DeadlineQueue(Infinity), "ms must be");
  assertThrows(() => new DeadlineQueue(NaN), "ms must be");
});

Deno.test("DeadlineQueue: with nothing pending its timer does not keep the process alive", async () => {
  // A child process that starts and finishes one operation with a 30 s
  // timeout must exit at once, not 30 s later.
  const code = `
    import { DeadlineQueue } from ${
    JSON.stringify(new URL("../../src/deadlines.ts", import.meta.url).href)
  };
    const queue = new DeadlineQueue(30_000);
    const cancel = queue.add(() => console.log("expired"));
    await new Promise((resolve) => setTimeout(resolve, 10));
    cancel();
    console.log("done");
  `;
  const started = performance.now();
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-config", code],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(20_000),
  }).output();
  assertEquals(new TextDecoder().decode(output.stderr), "");
  assertEquals(new TextDecoder().decode(output.stdout), "done\n");
  assertEquals(output.code, 0);
  assertEquals(performance.now() - started < 15_000, true, "exited long before the 30 s timeout");
});

Deno.test("DeadlineQueue: a pending operation keeps the process alive until its timeout (ref), or not (ref: false)", async () => {
  for (const ref of [true, false]) {
    const code = `
      import { DeadlineQueue } from ${
      JSON.stringify(new URL("../../src/deadlines.ts", import.meta.url).href)
    };
      const queue = new DeadlineQueue(200, { ref: ${ref} });
      queue.add(() => console.log("expired"));
    `;
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-config", code],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(new TextDecoder().decode(output.stdout), ref ? "expired\n" : "");
  }
});

Deno.test("DeadlineQueue: a callback that throws does not keep the others due with it from expiring", async () => {
  let now = 0;
  const queue = new DeadlineQueue(10, { now: () => now });
  const expired: string[] = [];
  const uncaught: unknown[] = [];
  const onError = (event: ErrorEvent) => {
    event.preventDefault();
    uncaught.push(event.error);
  };
  globalThis.addEventListener("error", onError);
  try {
    queue.add(() => {
      throw new Error("boom");
    });
    queue.add(() => expired.push("b"));
    queue.add(() => expired.push("c"));
    now = 10;
    await until(() => expired.length === 2, "b and c to expire");
    assertEquals(expired, ["b", "c"]);
    await until(() => uncaught.length === 1, "the error to be reported");
    assertEquals((uncaught[0] as Error).message, "boom");
    assertEquals(queue.size, 0);
  } finally {
    globalThis.removeEventListener("error", onError);
  }
});
