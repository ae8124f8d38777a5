/**
 * A raw TCP receiver on 127.0.0.1, port 0, that reads each HTTP/1.1 request
 * (head and `Content-Length` body) and lets a test write whatever bytes it
 * likes back, at whatever pace: hostile receivers for the delivery client.
 *
 * @module
 */

/** What a handler can do with one request's connection. */
export interface RawReply {
  /** Writes bytes; false once the client closed the connection (or the receiver closes). */
  write(data: string | Uint8Array): Promise<boolean>;
  /** Waits `ms` (a test-chosen pace), less when the receiver closes. */
  pause(ms: number): Promise<void>;
  /** Closes the connection. */
  close(): void;
}

/**
 * Answers request `index` (0-based, over every connection). Returning keeps
 * the connection open for the next request; a handler that never writes
 * leaves the client waiting.
 */
export type RawHandler = (reply: RawReply, index: number) => Promise<void>;

/** A running raw receiver; `await using` closes it and every connection. */
export interface RawReceiver extends AsyncDisposable {
  /** `http://127.0.0.1:<port>/hook`. */
  url: string;
  /** Raw text of each request received. */
  requests: string[];
  /** Connections accepted. */
  connections: number;
  /** Bytes the handlers managed to write. */
  written: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Starts a raw receiver answering with `handler`. */
export function rawReceiver(handler: RawHandler): RawReceiver {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const closing = new AbortController();
  const tasks = new Set<Promise<void>>();
  const receiver: RawReceiver = {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}/hook`,
    requests: [],
    connections: 0,
    written: 0,
    async [Symbol.asyncDispose]() {
      closing.abort();
      listener.close();
      for (const conn of conns) closeQuietly(conn);
      await accepting;
      await Promise.all(tasks);
    },
  };
  const accepting = (async () => {
    try {
      for await (const conn of listener) {
        conns.add(conn);
        receiver.connections++;
        const task = serve(conn).catch(() => {}).finally(() => {
          conns.delete(conn);
          closeQuietly(conn);
          tasks.delete(task);
        });
        tasks.add(task);
      }
    } catch {
      // Listener closed.
    }
  })();

  async function serve(conn: Deno.Conn): Promise<void> {
    let open = true;
    const reply: RawReply = {
      async write(data) {
        if (!open || closing.signal.aborted) return false;
        const bytes = typeof data === "string" ? encoder.encode(data) : data;
        try {
          for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
          receiver.written += bytes.length;
          return true;
        } catch {
          open = false;
          return false;
        }
      },
      pause(ms) {
        return new Promise((resolve) => {
          const timer = setTimeout(done, ms);
          closing.signal.addEventListener("abort", done, { once: true });
          function done() {
            clearTimeout(timer);
            closing.signal.removeEventListener("abort", done);
            resolve();
          }
        });
      },
      close() {
        open = false;
        closeQuietly(conn);
      },
    };
    const buffer = new Uint8Array(65536);
    let text = "";
    for (;;) {
      let end: number;
      while ((end = text.indexOf("\r\n\r\n")) < 0) {
        const read = await conn.read(buffer);
        if (read === null) return;
        text += decoder.decode(buffer.subarray(0, read));
      }
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      while (text.length < end + 4 + length) {
        const read = await conn.read(buffer);
        if (read === null) return;
        text += decoder.decode(buffer.subarray(0, read));
      }
      const index = receiver.requests.push(text.slice(0, end + 4 + length)) - 1;
      text = text.slice(end + 4 + length);
      await handler(reply, index);
      if (!open) return;
    }
  }

  return receiver;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}
