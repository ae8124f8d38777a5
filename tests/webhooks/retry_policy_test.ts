import { assertEquals, assertThrows } from "../_asserts.ts";
import type { GatewayError } from "../../src/errors/mod.ts";
import {
  formatRetrySchedule,
  MAX_RETRIES,
  nextRetryDelayMs,
  parseDuration,
  parseRetryAfter,
  parseRetrySchedule,
  retryDelayMs,
  totalAttempts,
} from "../../src/webhooks/mod.ts";

const HOUR = 3_600_000;

Deno.test("the default schedule is 1, 2, 4, 8, 16 x base plus at most 10 % jitter, then the DLQ", () => {
  const delays = [1, 2, 3, 4, 5, 6].map((attempt) =>
    nextRetryDelayMs({ attempt, baseMs: 1000, random: 0, retryAfterMaxMs: HOUR })
  );
  assertEquals(delays, [1000, 2000, 4000, 8000, 16000, null]);
  assertEquals(retryDelayMs(5, 1000, 0.999999), 17600);
  assertEquals(MAX_RETRIES, 5);
  assertEquals(totalAttempts(), 6);
});

Deno.test("a webhook's own schedule sets each wait and the number of retries", () => {
  const schedule = parseRetrySchedule("5s,5m,30m,2h,5h,10h,10h");
  assertEquals(schedule, [5000, 300_000, 1_800_000, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]);
  const delays = [1, 2, 7, 8].map((attempt) =>
    nextRetryDelayMs({ attempt, schedule, baseMs: 1000, random: 0, retryAfterMaxMs: HOUR })
  );
  assertEquals(delays, [5000, 300_000, 10 * HOUR, null]);
  assertEquals(
    nextRetryDelayMs({ attempt: 1, schedule, baseMs: 1000, random: 0.5, retryAfterMaxMs: HOUR }),
    5250,
  );
  assertEquals(totalAttempts(schedule), 8);
  assertEquals(formatRetrySchedule(schedule), "5s,5m,30m,2h,5h,10h,10h");
  assertEquals(formatRetrySchedule([1500, 90_000]), "1500ms,90s");
});

Deno.test("Retry-After lengthens a wait up to its cap, never shortens it or adds attempts", () => {
  const base = { baseMs: 1000, random: 0, retryAfterMaxMs: HOUR };
  assertEquals(nextRetryDelayMs({ ...base, attempt: 1, retryAfterMs: 120_000 }), 120_000);
  assertEquals(nextRetryDelayMs({ ...base, attempt: 1, retryAfterMs: 10 }), 1000);
  assertEquals(nextRetryDelayMs({ ...base, attempt: 1, retryAfterMs: 30 * HOUR }), HOUR);
  assertEquals(nextRetryDelayMs({ ...base, attempt: 6, retryAfterMs: 5000 }), null);
});

Deno.test("parseRetryAfter() reads delay-seconds and HTTP dates, and ignores anything else", () => {
  const now = Date.parse("2026-11-27T10:00:00Z");
  assertEquals(parseRetryAfter("120", now), 120_000);
  assertEquals(parseRetryAfter(" 0 ", now), 0);
  assertEquals(parseRetryAfter("Fri, 27 Nov 2026 10:01:30 GMT", now), 90_000);
  assertEquals(parseRetryAfter("Fri, 27 Nov 2026 09:00:00 GMT", now), 0);
  for (const bad of ["", "-5", "1.5", "soon", "12345678901", undefined, null]) {
    assertEquals(parseRetryAfter(bad, now), undefined, String(bad));
  }
});

Deno.test("a bad --retry-schedule names the entry, the limits and an example", () => {
  const cases: [string, RegExp][] = [
    ["", /expected comma-separated delays/],
    ["5s,,5m", /expected comma-separated delays/],
    ["5 minutes", /Invalid --retry-schedule "5 minutes": expected a number and a unit/],
    ["0s", /delay "0s": each delay must be between 1ms and 7d/],
    ["0", /delay "0": each delay must be between 1ms and 7d/],
    ["8d", /delay "8d": each delay must be between 1ms and 7d/],
    [new Array(31).fill("1s").join(","), /31 delays, at most 30 retries/],
  ];
  for (const [text, message] of cases) {
    const error = assertThrows(() => parseRetrySchedule(text));
    assertEquals((error as GatewayError).code, "USAGE");
    if (!message.test(error.message)) throw new Error(`${text}: ${error.message}`);
  }
  assertEquals(parseDuration("1.5h", "--overlap"), 5_400_000);
  assertThrows(() => parseDuration("24", "--overlap"), 'Invalid --overlap "24"');
});
