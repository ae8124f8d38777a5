/**
 * A Server-Sent Events reader over `fetch`, with reconnection that resumes
 * from `Last-Event-ID` (no dependencies; Deno, Node 20 and browsers).
 *
 * @module
 */
import { errorFromHttp, ToolgateError } from "./errors.ts";

/** One dispatched SSE event. */
export interface SseMessage {
  /** `event:` field, `message` when absent. */
  event: string;
  /** `data:` lines joined with `\n`. */
  data: string;
  /** The last event id seen so far (`id:` of this or an earlier event). */
  lastEventId: string;
}

/**
 * Incremental SSE parser (WHATWG HTML § 9.2.6): feed decoded text, get the
 * events completed by it. Handles CRLF, CR and LF line ends split across
 * chunks, comments, multi-line data and `retry:`.
 */
export class SseParser {
  #buffer = "";
  #event = "";
  #data: string[] = [];
  #sawData = false;
  #lastEventId = "";
  #pendingCr = false;
  /** The last `retry:` value in ms, if the server sent one. */
  retryMs: number | undefined;

  /** @param lastEventId The id to start from (after a reconnection). */
  constructor(lastEventId = "") {
    this.#lastEventId = lastEventId;
  }

  /** The last event id seen. */
  get lastEventId(): string {
    return this.#lastEventId;
  }

  /** Feeds decoded text; returns the events it completed. */
  push(text: string): SseMessage[] {
    const out: SseMessage[] = [];
    let chunk = text;
    if (this.#pendingCr && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.#pendingCr = false;
    this.#buffer += chunk;
    let start = 0;
    for (let i = 0; i < this.#buffer.length; i++) {
      const char = this.#buffer[i];
      if (char !== "\n" && char !== "\r") continue;
      this.#line(this.#buffer.slice(start, i), out);
      if (char === "\r") {
        if (i + 1 === this.#buffer.length) this.#pendingCr = true;
        else if (this.#buffer[i + 1] === "\n") i++;
      }
      start = i + 1;
    }
    this.#buffer = this.#buffer.slice(start);
    return out;
  }

  #line(line: string, out: SseMessage[]): void {
    if (line === "") {
      if (this.#sawData) {
        out.push({
          event: this.#event || "message",
          data: this.#data.join("\n"),
          lastEventId: this.#lastEventId,
        });
      }
      this.#event = "";
      this.#data = [];
      this.#sawData = false;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.#event = value;
        break;
      case "data":
        this.#data.push(value);
        this.#sawData = true;
        break;
      case "id":
        if (!value.includes("\0")) this.#lastEventId = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
    }
  }
}

/** Options of {@linkcode ReconnectingEventStream}. */
export interface EventStreamOptions {
  /** The stream's URL. */
  url: string;
  /** Extra request headers (e.g. `Authorization`). */
  headers?: Record<string, string>;
  /** The `fetch` to use. @default globalThis.fetch */
  fetch?: typeof fetch;
  /** Called for each event. */
  onMessage: (message: SseMessage) => void;
  /** Called for failures; reconnection continues unless the error is fatal. */
  onError: (error: ToolgateError) => void;
  /** First wait before reconnecting, in ms (a server `retry:` replaces it). @default 1000 */
  reconnectDelayMs?: number;
  /** Longest wait between reconnection attempts, in ms. @default 30000 */
  maxReconnectDelayMs?: number;
}

/** HTTP statuses after which reconnecting cannot help. */
const FATAL_STATUSES = new Set([400, 401, 403, 404, 405, 406]);

/**
 * A reconnecting SSE client: reads the stream, and when it ends or fails,
 * waits (doubling up to a limit while it keeps failing) and reconnects with
 * `Last-Event-ID`, so the server can replay what was missed.
 */
export class ReconnectingEventStream {
  #options: EventStreamOptions;
  #fetch: typeof fetch;
  #abort = new AbortController();
  #lastEventId = "";
  #opened!: () => void;
  #failed!: (error: ToolgateError) => void;
  #closed = false;
  #loop: Promise<void> | undefined;
  /** Resolves once the first connection is open; rejects on a fatal error. */
  readonly ready: Promise<void>;

  /** @param options URL, headers and callbacks. */
  constructor(options: EventStreamOptions) {
    this.#options = options;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.ready = new Promise<void>((resolve, reject) => {
      this.#opened = resolve;
      this.#failed = reject;
    });
    // Callers that never await `ready` must not see an unhandled rejection.
    this.ready.catch(() => {});
  }

  /** The id of the last event received. */
  get lastEventId(): string {
    return this.#lastEventId;
  }

  /** Starts reading (idempotent). */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** Stops reading and waits for the reader to finish. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#abort.abort();
    this.#failed(new ToolgateError("USAGE", "Event stream closed before it opened"));
    await this.#loop;
  }

  async #run(): Promise<void> {
    const { reconnectDelayMs = 1000, maxReconnectDelayMs = 30_000 } = this.#options;
    let delay = reconnectDelayMs;
    let serverRetry: number | undefined;
    while (!this.#closed) {
      let healthy = false;
      try {
        const parser = await this.#read();
        healthy = true;
        serverRetry = parser?.retryMs ?? serverRetry;
      } catch (error) {
        if (this.#closed) break;
        const failure = error instanceof ToolgateError ? error : new ToolgateError(
          "CONNECTION_FAILED",
          `Event stream failed: ${(error as Error)?.message ?? String(error)}`,
          { cause: error },
        );
        const status = (failure.details as { status?: number } | undefined)?.status;
        if (
          failure.code === "UNAUTHORIZED" || failure.code === "FORBIDDEN" ||
          failure.code === "USAGE" || (status !== undefined && FATAL_STATUSES.has(status))
        ) {
          this.#closed = true;
          this.#failed(failure);
          this.#options.onError(failure);
          break;
        }
        this.#options.onError(failure);
      }
      if (this.#closed) break;
      const base = serverRetry ?? reconnectDelayMs;
      delay = healthy ? base : Math.min(Math.max(delay * 2, base), maxReconnectDelayMs);
      await this.#sleep(healthy ? base : delay);
    }
  }

  /** One connection: resolves when the server ends the stream. */
  async #read(): Promise<SseParser | undefined> {
    const headers: Record<string, string> = {
      accept: "text/event-stream",
      ...this.#options.headers,
    };
    if (this.#lastEventId) headers["last-event-id"] = this.#lastEventId;
    const response = await this.#fetch(this.#options.url, {
      headers,
      signal: this.#abort.signal,
    });
    if (!response.ok || response.body === null) {
      const body = await response.text().catch(() => "");
      throw errorFromHttp(response.status, body);
    }
    this.#opened();
    const parser = new SseParser(this.#lastEventId);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return parser;
        for (const message of parser.push(value)) {
          this.#lastEventId = message.lastEventId;
          this.#options.onMessage(message);
        }
      }
    } catch (error) {
      await reader.cancel().catch(() => {
        // The body already failed; the original error is what matters.
      });
      throw error;
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.#abort.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
    });
  }
}
