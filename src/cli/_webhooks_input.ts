/**
 * Option values several `toolgate webhooks` subcommands read alike: a
 * secret (given, or `-` for stdin) and repeatable options.
 *
 * @module
 */
import { type CliContext, usage } from "./context.ts";

/** Reads `--secret`: the value given, or stdin for `-`; empty is refused. */
export async function readSecret(
  context: CliContext,
  raw: string | undefined,
): Promise<string | undefined> {
  if (raw === undefined) return undefined;
  const secret = raw === "-" ? (await context.io.readStdin()).replace(/\r?\n$/, "") : raw;
  if (secret.length === 0) throw usage("Invalid --secret: empty; give a value or - to read stdin");
  return secret;
}

/** Commander's collector for a repeatable option. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}
