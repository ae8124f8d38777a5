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
  type AuditProofs,
  type Checkpointer,
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

const KeySchema = z.object({
  id: z.string().openapi({ example: "7f3a9c21" }),
  verifier_key: z.string().openapi({
    description:
      "C2SP signed-note verifier key: <name>+<hex key id>+<base64(0x01 || Ed25519 public key)>",
  }),
  created_at: z.string(),
  retired_at: z.string().optional(),
}).openapi("AuditLogKey");

const KeysSchema = z.object({
  origin: z.string().openapi({ description: "The log's name: its checkpoints' origin line" }),
  verifier_key: z.string().openapi({ description: "The current key's verifier key" }),
  keys: z.array(KeySchema).openapi({
    description: "Every key, the current first, then retired ones",
  }),
}).openapi("AuditLogKeys");

const keyRoute = createRoute({
  method: "get",
  path: "/audit/key",
  operationId: "getAuditKey",
  tags: ["audit"],
  summary: "The log's signing keys (verifier keys of checkpoints and receipts)",
  responses: {
    200: { description: "The keys", content: { "application/json": { schema: KeysSchema } } },
    ...errorResponses([401, 403, 503]),
  },
});

const checkpointRoute = createRoute({
  method: "get",
  path: "/audit/checkpoint",
  operationId: "getAuditCheckpoint",
  tags: ["audit"],
  summary: "The latest signed checkpoint (C2SP tlog-checkpoint, a signed note)",
  responses: {
    200: {
      description: "Origin, tree size, base64 root hash, a blank line and the signature lines",
      content: { "text/plain": { schema: z.string() } },
    },
    ...errorResponses([401, 403, 404, 503]),
  },
});

const Base64HashesSchema = z.array(z.string()).openapi({
  description: "Base64 SHA-256 hashes, in RFC 9162 order",
});

const inclusionRoute = createRoute({
  method: "get",
  path: "/audit/proof/inclusion",
  operationId: "getAuditInclusionProof",
  tags: ["audit"],
  summary: "Proof that an entry is in the tree of a size (RFC 9162 §2.1.3)",
  request: {
    query: z.object({
      seq: z.coerce.number().int().min(1).openapi({
        description: "The entry's seq (leaf seq - 1)",
      }),
      size: z.coerce.number().int().min(1).optional().openapi({
        description: "Tree size of a checkpoint (default: the latest checkpoint's)",
      }),
    }),
  },
  responses: {
    200: {
      description: "The audit path from the leaf up",
      content: {
        "application/json": {
          schema: z.object({
            leaf_index: z.number().int(),
            tree_size: z.number().int(),
            hashes: Base64HashesSchema,
          }).openapi("AuditInclusionProof"),
        },
      },
    },
    ...errorResponses([400, 401, 403, 404]),
  },
});

const consistencyRoute = createRoute({
  method: "get",
  path: "/audit/proof/consistency",
  operationId: "getAuditConsistencyProof",
  tags: ["audit"],
  summary: "Proof that the tree of one size extends the tree of a smaller one (RFC 9162 §2.1.4)",
  request: {
    query: z.object({
      from: z.coerce.number().int().min(0).openapi({ description: "The smaller tree size" }),
      to: z.coerce.number().int().min(0).optional().openapi({
        description: "The larger tree size (default: the latest checkpoint's)",
      }),
    }),
  },
  responses: {
    200: {
      description: "The consistency proof",
      content: {
        "application/json": {
          schema: z.object({ hashes: Base64HashesSchema }).openapi("AuditConsistencyProof"),
        },
      },
    },
    ...errorResponses([400, 401, 403, 404]),
  },
});

/** What `/audit/key`, `/audit/checkpoint` and the proofs need beside the log. */
export interface AuditRouteOptions {
  /** The store holding the tree. */
  proofs?: AuditProofs;
  /** The server's checkpointer (keys and checkpoints); absent: those routes answer 503. */
  checkpointer?: Checkpointer;
}

/** The latest checkpoint's tree size, else the stored tree's. */
async function defaultSize(proofs: AuditProofs, checkpointer?: Checkpointer): Promise<number> {
  const latest = await checkpointer?.latest();
  return latest?.size ?? await proofs.treeSize();
}

function unavailable(): GatewayError {
  return new GatewayError("UNAVAILABLE", "The audit log's keys are not loaded in this process");
}

/** Mounts `GET /audit`, `/audit/key`, `/audit/checkpoint` and `/audit/proof/*` on the app. */
export function auditRoutes(audit: AuditLog, options: AuditRouteOptions = {}): RouteMount {
  const { proofs, checkpointer } = options;
  return function mountAudit(app) {
    app.openapi(keyRoute, (c) => {
      if (!checkpointer) throw unavailable();
      const keys = checkpointer.keys;
      return c.json({
        origin: checkpointer.origin,
        verifier_key: keys.signer.verifierKey,
        keys: [...keys.listed],
      }, 200);
    });
    app.openapi(checkpointRoute, async (c) => {
      if (!checkpointer) throw unavailable();
      const latest = await checkpointer.latest();
      if (!latest) {
        throw new GatewayError("NOT_FOUND", "No checkpoint yet: one follows the first entry");
      }
      return c.text(latest.note, 200, { "content-type": "text/plain; charset=utf-8" });
    });
    if (proofs) {
      app.openapi(inclusionRoute, async (c) => {
        const { seq, size } = c.req.valid("query");
        return c.json(
          await proofs.inclusion(seq, size ?? await defaultSize(proofs, checkpointer)),
          200,
        );
      });
      app.openapi(consistencyRoute, async (c) => {
        const { from, to } = c.req.valid("query");
        return c.json(
          await proofs.consistency(from, to ?? await defaultSize(proofs, checkpointer)),
          200,
        );
      });
    }
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
    // The entry before was pruned: the prune mark holds its hash.
    const pruned = previous || first.seq === 1 ? null : await audit.pruned();
    const expected = first.seq === 1
      ? GENESIS_HASH
      : previous?.entry_hash ?? (pruned?.through === first.seq - 1 ? pruned.hash : undefined);
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
