/**
 * The `memory` plugin: a persistent key/value notebook for agents, kept in
 * the data directory's store. Every tool is idempotent.
 *
 * - `memory_set {key, value}` → `{key, created, updated_at, size_bytes}`
 * - `memory_get {key}` → `{key, found: true, value, updated_at}` or `{key, found: false}`
 * - `memory_list {prefix?, limit?, include_values?}` → `{entries, count, truncated}`
 * - `memory_delete {key}` → `{key, deleted}`
 *
 * @module
 */
import { z } from "zod";
import type { PluginDefinition, ToolDefinition } from "../../gateway/mod.ts";
import { MEMORY_KEY_MAX_CHARS, MEMORY_VALUE_MAX_BYTES, memoryKeyProblem } from "../../store/mod.ts";
import { VERSION } from "../../version.ts";

/** Most entries `memory_list` returns in one call. */
export const MEMORY_LIST_MAX = 1000;

const KeySchema = z.string()
  .min(1, "Too small: expected a non-empty key")
  .max(MEMORY_KEY_MAX_CHARS)
  .superRefine((key, context) => {
    const problem = memoryKeyProblem(key);
    // Emptiness and length are reported by min() and max() above.
    if (problem && key.length > 0 && [...key].length <= MEMORY_KEY_MAX_CHARS) {
      context.addIssue({ code: "custom", message: problem });
    }
  })
  .describe(`The entry's key (1–${MEMORY_KEY_MAX_CHARS} characters), e.g. "project/notes"`);

const SetInput = z.strictObject({
  key: KeySchema,
  value: z.unknown()
    .refine((value) => value !== undefined, {
      message: "Invalid input: expected a JSON value, received undefined",
    })
    .describe(`Any JSON value; its JSON text may be up to ${MEMORY_VALUE_MAX_BYTES} bytes`),
});

const KeyInput = z.strictObject({ key: KeySchema });

const ListInput = z.strictObject({
  prefix: z.string().max(MEMORY_KEY_MAX_CHARS).optional()
    .describe("Only keys starting with this text (default: all)"),
  limit: z.number().int().min(1).max(MEMORY_LIST_MAX).optional()
    .describe(`At most this many entries, 1–${MEMORY_LIST_MAX} (default 100)`),
  include_values: z.boolean().optional()
    .describe("Include each entry's value (default false: keys, sizes and times only)"),
});

function tools(): ToolDefinition[] {
  return [
    {
      name: "memory_set",
      description:
        "Store a JSON value under a key in the persistent notebook, replacing any previous value. Returns whether the key was new.",
      input: SetInput,
      idempotent: true,
      mcpListing: {
        annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
      },
      async execute(args, context) {
        const { key, value } = args as z.infer<typeof SetInput>;
        const result = await context.store.memory.set(key, value);
        return { key, ...result };
      },
    },
    {
      name: "memory_get",
      description:
        "Read the JSON value stored under a key. A missing key is not an error: it returns found=false.",
      input: KeyInput,
      idempotent: true,
      mcpListing: { annotations: { readOnlyHint: true, openWorldHint: false } },
      async execute(args, context) {
        const { key } = args as z.infer<typeof KeyInput>;
        const entry = await context.store.memory.get(key);
        if (!entry) return { key, found: false };
        return { key, found: true, value: entry.value, updated_at: entry.updated_at };
      },
    },
    {
      name: "memory_list",
      description:
        "List the notebook's keys in order, optionally only those starting with a prefix, with their sizes and update times (and values with include_values).",
      input: ListInput,
      idempotent: true,
      mcpListing: { annotations: { readOnlyHint: true, openWorldHint: false } },
      async execute(args, context) {
        const { prefix, limit = 100, include_values = false } = args as z.infer<typeof ListInput>;
        const { entries, truncated } = await context.store.memory.list({ prefix, limit });
        return {
          entries: entries.map((entry) => ({
            key: entry.key,
            updated_at: entry.updated_at,
            size_bytes: entry.size_bytes,
            ...(include_values ? { value: entry.value } : {}),
          })),
          count: entries.length,
          truncated,
        };
      },
    },
    {
      name: "memory_delete",
      description:
        "Delete the value stored under a key. Deleting a missing key is not an error: it returns deleted=false.",
      input: KeyInput,
      idempotent: true,
      mcpListing: {
        annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
      },
      async execute(args, context) {
        const { key } = args as z.infer<typeof KeyInput>;
        return { key, deleted: await context.store.memory.delete(key) };
      },
    },
  ];
}

/**
 * The `memory` plugin definition (zero-config).
 *
 * @example
 * ```ts
 * new Gateway({ config, store, bus, plugins: [memoryPlugin()] });
 * ```
 */
export function memoryPlugin(): PluginDefinition {
  return {
    name: "memory",
    version: VERSION,
    description: "A persistent key/value notebook (JSON values) kept in the data directory",
    zeroConfig: true,
    tools: tools(),
  };
}
