/**
 * Minimal assertions (JSR's @std/assert is unreachable here), built on
 * `node:assert` so failures show diffs.
 *
 * @module
 */
import nodeAssert from "node:assert/strict";

/** Asserts that `value` is truthy. */
export function assert(value: unknown, message?: string): asserts value {
  nodeAssert.ok(value, message);
}

/** Asserts deep equality. */
export function assertEquals<T>(actual: unknown, expected: T, message?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

/** Asserts inequality. */
export function assertNotEquals(actual: unknown, expected: unknown, message?: string): void {
  nodeAssert.notDeepStrictEqual(actual, expected, message);
}

/** Asserts that `actual` matches `pattern`. */
export function assertMatch(actual: string, pattern: RegExp, message?: string): void {
  nodeAssert.match(actual, pattern, message);
}

/** Asserts that `actual` contains `expected`. */
export function assertStringIncludes(actual: string, expected: string, message?: string): void {
  nodeAssert.ok(
    actual.includes(expected),
    message ?? `expected ${JSON.stringify(actual)} to include ${JSON.stringify(expected)}`,
  );
}

/** Asserts that `fn` rejects, optionally with an error of `ErrorClass` whose message includes `includes`. */
export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  ErrorClass?: new (...args: any[]) => E,
  includes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (error) {
    if (ErrorClass && !(error instanceof ErrorClass)) {
      throw new nodeAssert.AssertionError({
        message: `expected ${ErrorClass.name}, got ${(error as Error)?.constructor?.name}: ${
          (error as Error)?.message
        }`,
      });
    }
    if (includes && !(error as Error).message.includes(includes)) {
      throw new nodeAssert.AssertionError({
        message: `expected message to include ${JSON.stringify(includes)}, got ${
          JSON.stringify((error as Error).message)
        }`,
      });
    }
    return error as E;
  }
  throw new nodeAssert.AssertionError({ message: "expected the function to reject" });
}

/** Asserts that `fn` throws synchronously. */
export function assertThrows(fn: () => unknown, includes?: string): Error {
  try {
    fn();
  } catch (error) {
    if (includes && !(error as Error).message.includes(includes)) {
      throw new nodeAssert.AssertionError({
        message: `expected message to include ${JSON.stringify(includes)}, got ${
          JSON.stringify((error as Error).message)
        }`,
      });
    }
    return error as Error;
  }
  throw new nodeAssert.AssertionError({ message: "expected the function to throw" });
}
