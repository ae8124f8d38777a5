/**
 * One open connection to an upstream (`Live`): what it holds while it is
 * open, and its end — closed, and how its stdio process ended reported.
 *
 * @module
 */
import { type Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import type { AskCaller, LogMessage, ProgressUpdate } from "../../gateway/mod.ts";
import { truncate } from "./_error_text.ts";

/** The protocol revision without sessions, whose requests carry their log level. */
export const MODERN_REVISION = "2026-07-28";

/** Stderr lines of a stdio upstream kept for its `last_error`. */
const STDERR_TAIL_LINES = 5;

/** How long a failed start or a lost process is given to report its exit and last stderr. */
export const EXIT_REPORT_WAIT_MS = 1000;

/** An open connection to an upstream, with the calls in flight on it. */
export interface Live {
  client: Client;
  transport: StdioClientTransport | StreamableHTTPClientTransport;
  generation: number;
  /** A stdio upstream's last stderr lines. */
  stderr?: StderrTail;
  /** Progress listeners of the calls in flight, by the progress token sent with each. */
  progress: Map<string, (update: ProgressUpdate) => void>;
  /** Log listeners of the calls in flight (a log message names no request: each gets it). */
  logs: Set<(message: LogMessage) => void>;
  /** The calls in flight whose callers can answer requests for input. */
  askers: Set<Asker>;
  /** A stdio upstream's process, once spawned (the SDK forgets it when it ends). */
  child?: ChildEvents;
}

/** A call in flight whose caller can be asked for input. */
export interface Asker {
  ask: AskCaller;
  signal: AbortSignal;
}

/** Whether a connection speaks 2026-07-28 (no sessions: subscriptions are `subscriptions/listen` streams). */
export function isModern(live: Live): boolean {
  return live.client.getNegotiatedProtocolVersion() === MODERN_REVISION;
}

/** What is used of the SDK transport's child process (a `node:child_process` one). */
export interface ChildEvents {
  pid?: number;
  exitCode: number | null;
  signalCode: string | null;
  once(event: "exit", listener: () => void): unknown;
}

/**
 * Keeps the transport's child process in `live` once it is spawned: the SDK
 * holds it privately and drops it when the process ends, which is when its
 * exit status is wanted.
 */
export function keepChild(transport: StdioClientTransport, live: Live): void {
  const start = transport.start.bind(transport);
  transport.start = async () => {
    try {
      await start();
    } finally {
      live.child = (transport as unknown as { _process?: ChildEvents })._process;
    }
  };
}

/** The last lines a stdio upstream wrote to stderr, and whether it closed stderr. */
export class StderrTail {
  #lines: string[] = [];
  #ended = Promise.withResolvers<void>();

  /** Keeps `line`, dropping the oldest beyond {@linkcode STDERR_TAIL_LINES}. */
  push(line: string): void {
    this.#lines.push(line);
    if (this.#lines.length > STDERR_TAIL_LINES) this.#lines.shift();
  }

  /** Marks stderr closed (every line is in). */
  end(): void {
    this.#ended.resolve();
  }

  /** Resolves once stderr is closed. */
  get ended(): Promise<void> {
    return this.#ended.promise;
  }

  /** The kept lines, one text (`undefined` when there were none). */
  text(): string | undefined {
    return this.#lines.length ? truncate(this.#lines.join(" | ")) : undefined;
  }
}

/** How a stdio upstream's process ended, for `last_error`. */
export interface ExitReport {
  /** `exited with code 1`, `was killed by SIGKILL`; none while it runs. */
  status?: string;
  /** Its last stderr lines, `" | "`-joined. */
  stderr?: string;
}

/** `; stderr: <lines>`, or nothing. */
export function stderrSuffix(exit: ExitReport): string {
  return exit.stderr ? `; stderr: ${exit.stderr}` : "";
}

/**
 * How a stdio upstream's process ended and what it last wrote to stderr;
 * waits up to `waitMs` for the exit and the end of its stderr.
 */
export async function exitReport(live: Live, waitMs: number): Promise<ExitReport> {
  const { child } = live;
  const exitedNow = () =>
    child !== undefined && (child.exitCode !== null || child.signalCode !== null);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<void>((resolve) => timer = setTimeout(resolve, waitMs));
  const exited = new Promise<void>((resolve) => {
    if (!child || exitedNow()) resolve();
    else child.once("exit", () => resolve());
  });
  await Promise.race([Promise.all([exited, live.stderr?.ended]), timeout]);
  clearTimeout(timer);
  const report: ExitReport = { stderr: live.stderr?.text() };
  if (exitedNow()) {
    report.status = child!.signalCode !== null
      ? `was killed by ${child!.signalCode}`
      : `exited with code ${child!.exitCode}`;
  }
  return report;
}

/**
 * Closes a connection: a stdio upstream gets its stdin closed and, if it
 * does not exit, SIGTERM then SIGKILL (the SDK's sequence, 2 s apart); with
 * `force`, SIGTERM right away (a failed or stuck start). The SDK's SIGKILL
 * is sent through `node:child_process`, which in Deno does nothing after an
 * earlier `kill()`; so a child still running once the SDK is done gets
 * SIGKILL from here.
 */
export async function closeLive(live: Live, force = false): Promise<void> {
  live.client.onclose = undefined;
  const pid = live.transport instanceof StdioClientTransport ? live.transport.pid : null;
  const { child } = live;
  // Exited before (a crash): never signal its pid, which may have been reused.
  let exited = !child || child.exitCode !== null || child.signalCode !== null;
  child?.once("exit", () => {
    exited = true;
  });
  if (force && pid !== null) {
    try {
      Deno.kill(pid, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
  try {
    if (live.transport instanceof StreamableHTTPClientTransport && live.transport.sessionId) {
      await live.transport.terminateSession().catch(() => {
        // The server may be gone already; the session expires there.
      });
    }
    await live.client.close();
  } catch {
    // Closing a dead connection: nothing left to release.
  }
  if (pid !== null && !exited) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch {
      // It exited meanwhile.
    }
  }
}
