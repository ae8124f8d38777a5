/**
 * Events: the 8 event types, their zod schemas, the envelope and the
 * in-process bus.
 *
 * @module
 */
export * from "./schemas.ts";
export * from "./bus.ts";
export { type EventRelay, relayEvents, type RelayEventsOptions } from "./relay.ts";
