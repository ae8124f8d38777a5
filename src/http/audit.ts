/**
 * `GET /audit`: pages the hash-chained audit log and reports the chain's
 * status as far as this page checked it.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import {
  AUDIT_KINDS,
  type AuditEntry,
  type AuditLog,
  computeEntryHash,
  DEFAULT_LIST_LIMIT,
  GENESIS_HASH,
  MAX_LIST_LIMIT,
} from "../audit/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

const AuditEntrySchema = z.object({
  seq: z.number().int(),
  timestamp: z.string(),
  kind: z.string().openapi({ example: "tool.call" }),
  tool: z.string(),
  session_id: z.string().optional(),
  input: z.unknown().openapi({ description: "The call's arguments or payload, redacted" }),
  outcome: z.record(z.string(), z.unknown()),
  previous_hash: z.string().openapi({ example: `sha256:${"0".repeat(64)}` }),
  entry_hash: z.string(),
}).openapi("AuditEntry");

/** Body of `GET /audit`. */
export const AuditPageSchema = z.object({
  entries: z.array(AuditEntrySchema),
  next: z.number().int().nullable().openapi({
    description: "Pass as `after` for the next page; null at the end of the log",
  }),
  chain: z.object({
    head_seq: z.number().int(),
    head_hash: z.string(),
    intact: z.boolean().openapi({
      description: "Every entry of this page hashes to its entry_hash and links to the " +
        "entry before it (checked as far as this page reaches); run `toolgate audit verify` " +
        "for the whole chain",
    }),
    checked_through: z.number().int().nullable(),
  }),
}).openapi("AuditPage");

const QuerySchema = z.object({
  after: z.coerce.number().int().min(0).optional().openapi({
    description: "Only entries after this seq (the `next` of the previous page)",
    example: 0,
  }),
  limit: z.coerce.number().int().min(1).max(MAX_LIST_LIMIT).optional().openapi({
    description: `Entries per page, 1 to ${MAX_LIST_LIMIT} (default ${DEFAULT_LIST_LIMIT})`,
  }),
  tool: z.string().min(1).optional().openapi({ description: "Only entries of this tool" }),
  caller: z.string().min(1).max(256).optional().openapi({
    description: "Only entries of this caller: an API key's name or id, or a caller kind " +
      "(admin, local, key)",
    example: "ci",
  }),
  kind: z.enum(AUDIT_KINDS, { error: `expected one of ${AUDIT_KINDS.join(", ")}` }).optional()
    .openapi({ description: `Only entries of this kind (${AUDIT_KINDS.join(", ")})` }),
  since: z.string().datetime({ offset: true }).optional().openapi({
    description: "Only entries written at or after this ISO 8601 time",
  }),
});

const auditRoute = createRoute({
  method: "get",
  path: "/audit",
  operationId: "listAudit",
  tags: ["audit"],
  summary: "Page the append-only audit log",
  request: { query: QuerySchema },
  responses: {
    200: {
      description: "A page of entries in seq order, and the chain status",
      content: { "application/json": { schema: AuditPageSchema } },
    },
    ...errorResponses([400, 401, 403]),
  },
});

/** Mounts `GET /audit` on the app. */
export function auditRoutes(audit: AuditLog): RouteMount {
  return function mountAudit(app) {
    app.openapi(auditRoute, async (c) => {
      const query = c.req.valid("query");
      const [page, head] = await Promise.all([audit.list(query), audit.head()]);
      const checked = await checkPage(
        audit,
        page.entries,
        query.tool || query.kind || query.caller ? false : true,
      );
      return c.json({
        entries: page.entries,
        next: page.next_after,
        chain: { ...head, ...checked },
      }, 200);
    });
  };
}

async function checkPage(
  audit: AuditLog,
  entries: AuditEntry[],
  contiguous: boolean,
): Promise<{ intact: boolean; checked_through: number | null }> {
  if (entries.length === 0) return { intact: true, checked_through: null };
  let previous: AuditEntry | null = null;
  const first = entries[0];
  if (contiguous) {
    previous = first.seq === 1 ? null : await audit.get(first.seq - 1);
    const expected = first.seq === 1 ? GENESIS_HASH : previous?.entry_hash;
    if (expected !== first.previous_hash) return { intact: false, checked_through: first.seq };
  }
  for (const entry of entries) {
    let hash: string;
    try {
      hash = computeEntryHash(entry);
    } catch (error) {
      throw new GatewayError("STORE_CORRUPT", `Audit entry ${entry.seq} is unreadable`, {
        cause: error,
      });
    }
    if (hash !== entry.entry_hash) return { intact: false, checked_through: entry.seq };
    if (previous && previous.seq === entry.seq - 1 && entry.previous_hash !== previous.entry_hash) {
      return { intact: false, checked_through: entry.seq };
    }
    previous = entry;
  }
  return { intact: true, checked_through: entries.at(-1)!.seq };
}
