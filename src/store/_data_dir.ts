/**
 * The data directory every store keeps its files in (the KV database, the
 * `dlq.json` mirror), whichever adapter holds the data.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";

/**
 * Creates the data directory with mode 0700 when missing.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when the path cannot be read or is not a directory.
 */
export async function ensureDataDir(dataDir: string): Promise<void> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(dataDir);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot read data directory ${dataDir}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    await Deno.mkdir(dataDir, { recursive: true, mode: 0o700 });
    await Deno.chmod(dataDir, 0o700);
    return;
  }
  if (!info.isDirectory) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Data directory ${dataDir} is not a directory: move the file away or set TOOLGATE_HOME`,
    );
  }
}
