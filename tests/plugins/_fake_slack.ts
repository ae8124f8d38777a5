/**
 * A local server speaking the Slack Web API shape (`chat.postMessage`,
 * `conversations.list`) on 127.0.0.1, port 0.
 *
 * Channel `C404` answers `channel_not_found`, `C500` an HTTP 500, `C429` a
 * rate limit with `Retry-After: 30`, `CECHO` an
 * error text that echoes the token (the plugin must scrub it); a wrong token
 * answers `invalid_auth`.
 *
 * @module
 */

/** A request the fake received. */
export interface SlackRequest {
  method: string;
  path: string;
  authorization: string | null;
  contentType: string | null;
  query: Record<string, string>;
  body: unknown;
}

/** The running fake. */
export interface FakeSlack extends AsyncDisposable {
  /** Base URL to put in `plugins.slack.api_base_url` / `TOOLGATE_SLACK_API_URL`. */
  url: string;
  /** Requests received, in order. */
  requests: SlackRequest[];
}

const CHANNELS = [
  { id: "C001", name: "general", is_private: false, is_member: true, num_members: 12 },
  { id: "C002", name: "random", is_private: false, is_member: false, num_members: 7 },
  { id: "C003", name: "deploys", is_private: false, is_member: true, num_members: 3 },
].map((c) => ({ ...c, is_archived: false, topic: { value: `${c.name} topic` }, purpose: {} }));

/** Starts the fake; it accepts exactly `token`. */
export function startFakeSlack(token: string): FakeSlack {
  const requests: SlackRequest[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const text = await req.text();
    let body: unknown = undefined;
    if (text) body = JSON.parse(text);
    requests.push({
      method: req.method,
      path: url.pathname,
      authorization: req.headers.get("authorization"),
      contentType: req.headers.get("content-type"),
      query: Object.fromEntries(url.searchParams),
      body,
    });
    if (req.headers.get("authorization") !== `Bearer ${token}`) {
      return Response.json({ ok: false, error: "invalid_auth" });
    }
    if (url.pathname === "/api/chat.postMessage" && req.method === "POST") {
      const { channel, text: message } = body as { channel: string; text: string };
      if (channel === "C404") return Response.json({ ok: false, error: "channel_not_found" });
      if (channel === "C500") return new Response("upstream exploded", { status: 500 });
      if (channel === "C429") {
        return Response.json({ ok: false, error: "ratelimited" }, {
          status: 429,
          headers: { "retry-after": "30" },
        });
      }
      if (channel === "CECHO") {
        return Response.json({ ok: false, error: `weird_error_${token}` });
      }
      return Response.json({
        ok: true,
        channel,
        ts: "1700000000.000100",
        message: { text: message, type: "message" },
      });
    }
    if (url.pathname === "/api/conversations.list" && req.method === "GET") {
      const limit = Number(url.searchParams.get("limit") ?? "100");
      const start = Number(url.searchParams.get("cursor") ?? "0");
      const page = CHANNELS.slice(start, start + limit);
      const next = start + limit < CHANNELS.length ? String(start + limit) : "";
      return Response.json({ ok: true, channels: page, response_metadata: { next_cursor: next } });
    }
    return Response.json({ ok: false, error: "unknown_method" }, { status: 404 });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/api`,
    requests,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}
