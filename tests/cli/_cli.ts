/**
 * Runs the real `toolgate` process with the encrypted file keychain forced
 * (tests never touch an OS keychain).
 *
 * @module
 */
import { type CliRun, runCli, type RunCliOptions } from "../_helpers.ts";

/** `toolgate <args>` with `TOOLGATE_HOME=home` and `TOOLGATE_KEYCHAIN=file`. */
export function toolgate(
  args: string[],
  home: string,
  options: Omit<RunCliOptions, "home"> = {},
): Promise<CliRun> {
  return runCli(args, {
    ...options,
    home,
    env: { TOOLGATE_KEYCHAIN: "file", ...options.env },
  });
}

/** Everything a run printed. */
export function printed(run: CliRun): string {
  return run.stdout + run.stderr;
}
