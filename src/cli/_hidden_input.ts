/**
 * Reads one line from a terminal without echoing it: the keychain's prompt
 * for a secret. Written by hand: Deno's `prompt()` echoes what is typed, and
 * the npm prompt libraries are written for Node's `process.stdin`.
 *
 * @module
 */

/** What is used of `Deno.stdin` (injected by tests). */
export interface RawTerminal {
  setRaw(mode: boolean): void;
  read(buffer: Uint8Array): Promise<number | null>;
}

/** Raised when the user presses Ctrl-C at the prompt. */
export class InputCancelledError extends Error {
  constructor() {
    super("Cancelled at the prompt");
  }
}

const ENTER = new Set([0x0a, 0x0d]);
const BACKSPACE = new Set([0x08, 0x7f]);
const CTRL_C = 0x03;
const CTRL_D = 0x04;
const CTRL_U = 0x15;

/**
 * Reads a line with echo off: Enter ends it, Backspace removes the last
 * character, Ctrl-U the whole line, Ctrl-D on an empty line or the end of
 * input returns what was typed, Ctrl-C rejects.
 *
 * @param terminal `Deno.stdin` when it is a terminal.
 * @param write Writes the prompt and the final newline (stderr).
 * @throws {InputCancelledError} on Ctrl-C.
 */
export async function readHiddenLine(
  terminal: RawTerminal,
  prompt: string,
  write: (text: string) => void,
): Promise<string> {
  write(prompt);
  terminal.setRaw(true);
  const bytes: number[] = [];
  const buffer = new Uint8Array(256);
  try {
    for (;;) {
      const n = await terminal.read(buffer);
      if (n === null) break;
      for (const byte of buffer.subarray(0, n)) {
        if (ENTER.has(byte)) return decode(bytes);
        if (byte === CTRL_C) throw new InputCancelledError();
        if (byte === CTRL_D && bytes.length === 0) return "";
        if (BACKSPACE.has(byte)) removeLastCharacter(bytes);
        else if (byte === CTRL_U) bytes.length = 0;
        else if (byte >= 0x20 || byte === 0x09) bytes.push(byte);
      }
    }
    return decode(bytes);
  } finally {
    terminal.setRaw(false);
    write("\n");
  }
}

function decode(bytes: number[]): string {
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** Drops the last UTF-8 character (its continuation bytes too). */
function removeLastCharacter(bytes: number[]): void {
  while (bytes.length && (bytes[bytes.length - 1] & 0xc0) === 0x80) bytes.pop();
  bytes.pop();
}
