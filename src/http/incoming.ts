/**
 * Mounts the incoming webhook endpoints: every path registered with
 * `toolgate webhooks create` is handled by the {@linkcode IncomingRouter}.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { IncomingRouter } from "../webhooks/mod.ts";
import type { RouteMount } from "./types.ts";

/**
 * Mounts a catch-all after the built-in routes: a registered path goes to
 * the router, anything else is `404 NOT_FOUND`.
 */
export function incomingRoutes(router: IncomingRouter): RouteMount {
  return function mountIncoming(app) {
    app.all("*", (c) => {
      const endpoint = router.match(c.req.path);
      if (!endpoint) {
        throw new GatewayError("NOT_FOUND", `No route for ${c.req.method} ${c.req.path}`);
      }
      return router.handle(c.req.raw, endpoint);
    });
  };
}
