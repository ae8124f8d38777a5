/**
 * Runs a bench script of this checkout and of another one
 * (`TOOLGATE_BENCH_BEFORE=<checkout>`) in alternation, each in a process of
 * its own, so a change is measured before and after in one run on the same
 * machine state. Private to `scripts/bench`.
 *
 * @module
 */
import { ROOT } from "./_proc.ts";

/** The other checkout to compare with, when `TOOLGATE_BENCH_BEFORE` names one. */
export function beforeRoot(): string | undefined {
  const root = Deno.env.get("TOOLGATE_BENCH_BEFORE")?.replace(/\/+$/, "");
  return root ? `${root}/` : undefined;
}

async function runJson<T>(root: string, script: string, args: readonly string[]): Promise<T> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", `${root}${script}`, ...args],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (output.code !== 0) {
    throw new Error(`${root}${script} failed: ${new TextDecoder().decode(output.stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(output.stdout)) as T;
}

/**
 * `rounds` runs of `script` here and in `before`, alternating (here first).
 * With `harness: "here"`, both sides run this checkout's `script`, given
 * `--code=<side's checkout>` to import the code under test from.
 *
 * @returns Each side's results, in run order.
 */
export async function alternate<T>(
  before: string,
  script: string,
  args: readonly string[],
  rounds: number,
  { harness = "each" }: { harness?: "each" | "here" } = {},
): Promise<{ after: T[]; before: T[] }> {
  const here = ROOT.endsWith("/") ? ROOT : `${ROOT}/`;
  const run = (root: string) =>
    harness === "here"
      ? runJson<T>(here, script, [...args, `--code=${root}`])
      : runJson<T>(root, script, args);
  const out = { after: [] as T[], before: [] as T[] };
  for (let round = 0; round < rounds; round++) {
    out.after.push(await run(here));
    out.before.push(await run(before));
  }
  return out;
}

/** The median of `values`. */
export function median(values: readonly number[]): number {
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
