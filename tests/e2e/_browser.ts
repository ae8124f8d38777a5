/**
 * Debian's Chromium driven by playwright-core, for the console's tests: a
 * headless browser with a fresh profile, never a downloaded one.
 *
 * @module
 */
import { type Browser, chromium } from "playwright-core";
import { ROOT } from "../_helpers.ts";

/** Where Debian's `chromium` package installs the browser. */
export const CHROMIUM = "/usr/bin/chromium";

/** Where the tests save their screenshots (gitignored). */
export const ARTIFACTS = `${ROOT}test-artifacts/console`;

/**
 * Launches headless Chromium with a fresh user-data dir.
 *
 * @throws {Error} naming the package to install when the browser is missing.
 */
export async function launchChromium(): Promise<Browser & AsyncDisposable> {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `${CHROMIUM} is missing: the console's browser tests need Debian's chromium package ` +
        "(apt-get install chromium; .ci/run installs it)",
    );
  }
  // Never fetch a browser of playwright's own.
  Deno.env.set("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  });
  return Object.assign(browser, { [Symbol.asyncDispose]: () => browser.close() });
}
