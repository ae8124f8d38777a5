/**
 * The KV key layout. Every key is built here, never inline.
 *
 * @module
 */

/** Stored schema version. */
export function schemaVersionKey(): Deno.KvKey {
  return ["meta", "schema_version"];
}

/** Counter bumped on every registration change; running servers poll it. */
export function registrationsVersionKey(): Deno.KvKey {
  return ["meta", "registrations_version"];
}

/** An outgoing webhook registration. */
export function outgoingWebhookKey(id: string): Deno.KvKey {
  return ["webhooks", "out", id];
}

/** Prefix of all outgoing webhook registrations. */
export function outgoingWebhooksPrefix(): Deno.KvKey {
  return ["webhooks", "out"];
}

/** An incoming webhook endpoint registration. */
export function incomingWebhookKey(id: string): Deno.KvKey {
  return ["webhooks", "in", id];
}

/** Prefix of all incoming webhook registrations. */
export function incomingWebhooksPrefix(): Deno.KvKey {
  return ["webhooks", "in"];
}

/** Unique index: incoming path → id. */
export function incomingPathIndexKey(path: string): Deno.KvKey {
  return ["webhooks", "in_path", path];
}

/** Unique index: incoming name → id. */
export function incomingNameIndexKey(name: string): Deno.KvKey {
  return ["webhooks", "in_name", name];
}

/** Per-endpoint counters of an incoming webhook. */
export function incomingStatsKey(id: string, counter: string): Deno.KvKey {
  return ["webhooks", "in_stats", id, counter];
}

/** Prefix of the counters of one incoming webhook. */
export function incomingStatsPrefix(id: string): Deno.KvKey {
  return ["webhooks", "in_stats", id];
}

/** A value of the memory plugin's notebook. */
export function memoryKey(key: string): Deno.KvKey {
  return ["plugin", "memory", key];
}

/** Prefix of the memory plugin's notebook. */
export function memoryPrefix(): Deno.KvKey {
  return ["plugin", "memory"];
}

/** An encrypted keychain entry (file fallback backend). */
export function keychainKey(name: string): Deno.KvKey {
  return ["keychain", name];
}

/** Prefix of the keychain entries. */
export function keychainPrefix(): Deno.KvKey {
  return ["keychain"];
}
