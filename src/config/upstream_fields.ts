/**
 * Names and fields that the configuration and the store both check: the
 * pattern of an upstream's name, of a virtual server's, and the fields
 * that say how to reach an MCP upstream. A leaf (zod only), so the store
 * can use them without importing the configuration.
 *
 * @module
 */
import { z } from "zod";

/** Pattern of an MCP upstream plugin name (also the prefix of its tools: `<name>__<tool>`). */
export const UPSTREAM_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** A virtual server's name: it is a URL path segment (`/mcp/<name>`). */
export const VIRTUAL_SERVER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/**
 * The fields that describe how to reach an MCP upstream, shared by
 * `config.json` entries and `toolgate plugins add` registrations.
 */
export const MCP_UPSTREAM_FIELDS = {
  kind: z.literal("mcp"),
  command: z.string().min(1).optional(),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).default({}),
  url: z.url({ protocol: /^https?$/ }).optional(),
  headers: z.record(z.string(), z.string()).default({}),
  /** Only the tools, prompts (by the upstream's names) and resources (by URI) matching a glob. */
  include: z.array(z.string().min(1)).default([]),
  /** None of those matching a glob. */
  exclude: z.array(z.string().min(1)).default([]),
  /** The upstream's name of a tool or prompt → the name toolgate offers it under. */
  rename: z.record(
    z.string().min(1),
    z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, "expected 1-128 of A-Z a-z 0-9 _ . -"),
  ).default({}),
  /** `false`: offer the names as they are (after `rename`), without `<plugin>__`. */
  prefix: z.boolean().default(true),
};
