/**
 * PostgreSQL adapter: outgoing and incoming webhook registrations, incoming stats. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { WebhookStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const WEBHOOKS_SCHEMA = ``;

/** The outgoing and incoming webhook registrations, incoming stats, on PostgreSQL. */
export function createWebhookStore(_ctx: PgContext): WebhookStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: webhooks.${String(name)}`,
      );
    },
  }) as WebhookStore;
}
