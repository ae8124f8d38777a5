/**
 * Deno KV adapter: the identity of a store file. The KV file carries a store
 * id, and the data directory a marker file naming it, so that a file lost,
 * emptied or replaced by another store is refused before anything is
 * written to it.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { newId } from "../../ids.ts";
import { writeFileOnce } from "../_data_dir.ts";
import type { KvHandle } from "./_handle.ts";
import { storeIdKey } from "./keys.ts";

/** The data directory's record of its KV store (outside the KV file, so emptying the file cannot erase it). */
export const STORE_MARKER_FILE = "toolgate.kv.id";

async function readMarker(dataDir: string): Promise<string | undefined> {
  try {
    return (await Deno.readTextFile(`${dataDir}/${STORE_MARKER_FILE}`)).trim() || undefined;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot read ${dataDir}/${STORE_MARKER_FILE}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

function replacedError(path: string, marker: string, what: string): GatewayError {
  return new GatewayError(
    "STORE_CORRUPT",
    `Cannot use ${path}: ${what}, yet this data directory held store ${marker} ` +
      `(${STORE_MARKER_FILE}); nothing was created or changed. Restore toolgate.kv from a ` +
      `backup, or, to start over with an empty store and lose the old one for good, move ` +
      `${STORE_MARKER_FILE} and toolgate.kv away`,
    { details: { store_id: marker } },
  );
}

/** Refuses a missing or empty KV file where the marker says a store was. */
export async function checkStoreFile(dataDir: string, path: string): Promise<void> {
  const marker = await readMarker(dataDir);
  if (!marker) return;
  let size: number | undefined;
  try {
    size = (await Deno.stat(path)).size;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  if (size === undefined) throw replacedError(path, marker, "the file is missing");
  if (size === 0) throw replacedError(path, marker, "the file is empty (0 bytes)");
}

/**
 * Gives the KV file a store id (once) and keeps it in the marker file; a
 * file whose id is not the marker's (replaced by another store, or by a new
 * empty one) is refused.
 */
export async function claimStoreId(store: KvHandle, dataDir: string, path: string): Promise<void> {
  const marker = await readMarker(dataDir);
  const key = storeIdKey();
  let found = await store.retry(() => store.kv.get<string>(key));
  if (marker) {
    if (typeof found.value !== "string") {
      throw replacedError(path, marker, "it holds no store id (a new or foreign file)");
    }
    if (found.value !== marker) {
      throw replacedError(path, marker, `it is another store (${found.value})`);
    }
    return;
  }
  if (typeof found.value !== "string") {
    const made = newId("kvs");
    await store.retry(() =>
      store.kv.atomic().check({ key, versionstamp: null }).set(key, made).commit()
    );
    found = await store.retry(() => store.kv.get<string>(key));
  }
  const id = String(found.value);
  // Never replaces a marker another process wrote first (then compared below).
  await writeFileOnce(`${dataDir}/${STORE_MARKER_FILE}`, new TextEncoder().encode(`${id}\n`));
  const written = await readMarker(dataDir);
  if (written !== id) throw replacedError(path, written ?? "?", `it is another store (${id})`);
}
