/**
 * A real HTTP receiver on 127.0.0.1, port 0, recording every request's raw
 * bytes, headers and arrival time, answering as told.
 *
 * @module
 */

/** One request the receiver got. */
export interface ReceivedRequest {
  /** `performance.now()` on arrival. */
  at: number;
  path: string;
  headers: Headers;
  /** The raw body bytes. */
  body: Uint8Array;
}

/** A reply with headers of its own (e.g. `Retry-After`). */
export interface Reply {
  status: number;
  headers?: Record<string, string>;
}

/**
 * How to answer request number `index` (0-based): a status, a status with
 * headers, or `"hang"` until the client gives up.
 */
export type Behaviour = (request: ReceivedRequest, index: number) => number | Reply | "hang";

/** A running receiver; `await using` closes it. */
export class Receiver implements AsyncDisposable {
  readonly requests: ReceivedRequest[] = [];
  behaviour: Behaviour;
  #server: Deno.HttpServer<Deno.NetAddr>;
  #waiters: (() => void)[] = [];
  #hanging = new Set<() => void>();

  constructor(behaviour: Behaviour = () => 200) {
    this.behaviour = behaviour;
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (request) => this.#handle(request),
    );
  }

  /** Base URL, e.g. `http://127.0.0.1:43123`. */
  get origin(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  /** URL of the delivery endpoint. */
  get url(): string {
    return `${this.origin}/hook`;
  }

  async #handle(request: Request): Promise<Response> {
    const received: ReceivedRequest = {
      at: performance.now(),
      path: new URL(request.url).pathname,
      headers: request.headers,
      body: new Uint8Array(await request.arrayBuffer()),
    };
    const index = this.requests.push(received) - 1;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
    const answer = this.behaviour(received, index);
    if (answer === "hang") {
      // Held until the receiver closes; the client gives up long before.
      await new Promise<void>((resolve) => this.#hanging.add(resolve));
      return new Response(null, { status: 504 });
    }
    if (typeof answer === "object") {
      return new Response(`status ${answer.status}`, {
        status: answer.status,
        headers: answer.headers,
      });
    }
    if (answer >= 300 && answer < 400) {
      return new Response(null, { status: answer, headers: { Location: `${this.origin}/moved` } });
    }
    return new Response(`status ${answer}`, { status: answer });
  }

  /** Resolves once `count` requests arrived; rejects after `timeoutMs`. */
  async waitFor(count: number, timeoutMs = 5000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (this.requests.length < count) {
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new Error(
          `Receiver got ${this.requests.length} of ${count} requests in ${timeoutMs} ms`,
        );
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const release of this.#hanging) release();
    this.#hanging.clear();
    await this.#server.shutdown();
  }
}
