/**
 * C2SP tlog-checkpoint bodies (https://c2sp.org/tlog-checkpoint): the
 * origin line (the log's name), the tree size in decimal, the base64 root
 * hash, then optional extension lines, each ending in a newline. Signed as
 * a C2SP signed note (see {@link ./signed_note.ts}).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { HASH_BYTES } from "./merkle.ts";

/** What a checkpoint commits to. */
export interface Checkpoint {
  /** The log's name (its origin line). */
  origin: string;
  /** Leaves in the tree. */
  size: number;
  /** The RFC 9162 root hash of the tree of `size` leaves. */
  root: Uint8Array;
  /** Extension lines, in order (none in what toolgate signs). */
  extensions?: readonly string[];
}

/** A checkpoint body that does not parse. */
export class CheckpointError extends Error {
  override name = "CheckpointError";
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Whether `origin` can name a log: non-empty, one line, no spaces or `+`
 * (it also names the signing key), and not a bare number.
 */
export function originProblem(origin: string): string | undefined {
  if (!origin) return "it is empty";
  if (/[\s+]/u.test(origin)) return "it holds a space, a line break or +";
  if (/^\d+$/.test(origin)) return "it is a bare number";
  return undefined;
}

/**
 * The checkpoint's text, as signed.
 *
 * @example
 * ```ts
 * formatCheckpoint({ origin: "toolgate/dep_1", size: 0, root: EMPTY_ROOT });
 * // "toolgate/dep_1\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
 * ```
 */
export function formatCheckpoint(checkpoint: Checkpoint): string {
  const problem = originProblem(checkpoint.origin);
  if (problem) throw new CheckpointError(`Invalid origin "${checkpoint.origin}": ${problem}`);
  if (checkpoint.root.length !== HASH_BYTES) {
    throw new CheckpointError(`Invalid root hash: ${checkpoint.root.length} bytes, expected 32`);
  }
  const lines = [
    checkpoint.origin,
    String(checkpoint.size),
    Buffer.from(checkpoint.root).toString("base64"),
    ...(checkpoint.extensions ?? []),
  ];
  return lines.map((line) => `${line}\n`).join("");
}

/**
 * Parses a checkpoint's text (a signed note's text, signatures checked
 * already).
 *
 * @throws {CheckpointError} naming the line that is wrong.
 */
export function parseCheckpoint(text: string): Checkpoint {
  if (!text.endsWith("\n")) throw new CheckpointError("Malformed checkpoint: no final newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3) {
    throw new CheckpointError("Malformed checkpoint: expected origin, size and root lines");
  }
  const [origin, size, root, ...extensions] = lines;
  if (!origin) throw new CheckpointError("Malformed checkpoint: the origin line is empty");
  if (!/^(0|[1-9]\d*)$/.test(size) || !Number.isSafeInteger(Number(size))) {
    throw new CheckpointError(`Malformed checkpoint: size "${size}" is not a decimal number`);
  }
  const rootBytes = BASE64.test(root) ? new Uint8Array(Buffer.from(root, "base64")) : undefined;
  if (
    !rootBytes || rootBytes.length !== HASH_BYTES ||
    Buffer.from(rootBytes).toString("base64") !== root
  ) {
    throw new CheckpointError(`Malformed checkpoint: root "${root}" is not base64 of 32 bytes`);
  }
  if (extensions.some((line) => !line)) {
    throw new CheckpointError("Malformed checkpoint: an extension line is empty");
  }
  return { origin, size: Number(size), root: rootBytes, extensions };
}
