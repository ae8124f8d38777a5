/**
 * The answers of MCP over HTTP as the transport leaves them: a JSON-RPC
 * error response, a request's SSE answer turned into one JSON body when
 * nothing precedes it, and the moment a streamed body ends.
 *
 * @module
 */

/** A JSON-RPC error response without an id. */
export function rpcError(
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/**
 * Calls `done` once the response body finished, failed or was cancelled (at
 * once when there is no body).
 */
export function onBodyEnd(response: Response, done: () => void): Response {
  // A JSON (or empty) body is complete already: only an SSE stream stays
  // open. (The header first: reading `response.body` creates a stream.)
  if (!isEventStream(response) || response.body === null) {
    done();
    return response;
  }
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    done();
  };
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const chunk = await reader.read();
        if (chunk.done) {
          finish();
          controller.close();
        } else {
          controller.enqueue(chunk.value);
        }
      } catch (error) {
        finish();
        controller.error(error);
      }
    },
    async cancel(reason) {
      finish();
      await reader.cancel(reason);
    },
  });
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/**
 * A request's SSE answer as one JSON body when its first event is the
 * result (nothing was sent before it, so nothing follows: one request per
 * POST); otherwise the stream as it is, from its first byte. So a call that
 * reports progress, log messages or asks its caller for input gets a stream,
 * and every other request costs the client no SSE parsing. Comments
 * (keep-alives) before the first event are not events.
 */
export async function jsonWhenAlone(response: Response): Promise<Response> {
  if (!isEventStream(response) || response.body === null) return response;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const chunks: Uint8Array[] = [];
  let text = "";
  for (;;) {
    const chunk = await reader.read();
    if (chunk.done) break;
    chunks.push(chunk.value);
    text += decoder.decode(chunk.value, { stream: true });
    const data = firstEventData(text);
    if (data === undefined) continue;
    if (data !== null && isAnswer(data)) {
      void reader.cancel().catch(() => {});
      const headers = new Headers(response.headers);
      headers.set("content-type", "application/json");
      for (const name of ["cache-control", "connection", "x-accel-buffering"]) headers.delete(name);
      return new Response(data, { status: response.status, headers });
    }
    break;
  }
  let replayed = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!replayed) {
        replayed = true;
        for (const chunk of chunks) controller.enqueue(chunk);
        return;
      }
      try {
        const chunk = await reader.read();
        if (chunk.done) controller.close();
        else controller.enqueue(chunk.value);
      } catch (error) {
        controller.error(error);
      }
    },
    async cancel(reason) {
      await reader.cancel(reason);
    },
  });
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/**
 * The data of the first complete SSE event in `text`: `undefined` while none
 * is complete, `null` for one without data.
 */
function firstEventData(text: string): string | null | undefined {
  // The SDK writes each message as one `event: message` with one data line, in one chunk.
  const end = text.indexOf("\n\n");
  if (text.startsWith(SDK_EVENT_PREFIX) && end === text.length - 2) {
    const data = text.slice(SDK_EVENT_PREFIX.length, end);
    if (!data.includes("\n")) return data;
  }
  let rest = text;
  for (;;) {
    const end = rest.search(/\r?\n\r?\n/);
    if (end < 0) return undefined;
    const lines = rest.slice(0, end).split(/\r?\n/);
    rest = rest.slice(end).replace(/^\r?\n\r?\n/, "");
    if (lines.every((line) => line.startsWith(":"))) continue;
    const data = lines.filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""));
    return data.length ? data.join("\n") : null;
  }
}

/** How the SDK starts an SSE event without an id. */
const SDK_EVENT_PREFIX = "event: message\ndata: ";

/** Whether an SSE event's data is a JSON-RPC response (a result or an error). */
function isAnswer(data: string): boolean {
  // The SDK writes a result with `result` first; a request or notification never starts so.
  if (data.startsWith('{"result":')) return true;
  try {
    const message = JSON.parse(data);
    return typeof message === "object" && message !== null && "id" in message &&
      ("result" in message || "error" in message);
  } catch {
    return false;
  }
}

/** Whether a response is an SSE stream. */
export function isEventStream(response: Response): boolean {
  return response.headers.get("content-type")?.startsWith("text/event-stream") ?? false;
}
