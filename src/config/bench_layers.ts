/**
 * The per-call layers a benchmark may switch off (`TOOLGATE_BENCH_LAYERS_OFF`,
 * a comma-separated list), to measure what each costs a call
 * (`deno task bench --only=layer_cost`, BENCHMARKS.md). Not a setting: a
 * server with a layer off is not one to run for users (no caller checks
 * without `identity`, no events without `events`, …).
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";

/** Every layer that can be switched off, in the order the bench reports them. */
export const BENCH_LAYERS = [
  "http_checks",
  "identity",
  "rate_limits",
  "policies",
  "tracing",
  "metrics",
  "redaction",
  "events",
  "receipts",
] as const;

/** A per-call layer a benchmark may switch off. */
export type BenchLayer = typeof BENCH_LAYERS[number];

/**
 * The layers named by `TOOLGATE_BENCH_LAYERS_OFF` (empty when unset).
 *
 * @throws {GatewayError} `CONFIG_INVALID` naming an unknown layer and the known ones.
 */
export function parseBenchLayers(text: string | undefined): readonly BenchLayer[] {
  if (!text?.trim()) return [];
  const names = text.split(",").map((name) => name.trim()).filter(Boolean);
  for (const name of names) {
    if (!(BENCH_LAYERS as readonly string[]).includes(name)) {
      throw new GatewayError(
        "CONFIG_INVALID",
        `Invalid TOOLGATE_BENCH_LAYERS_OFF: unknown layer ${JSON.stringify(name)}; ` +
          `expected some of ${
            BENCH_LAYERS.join(", ")
          } (a benchmark switch: unset it to serve users)`,
      );
    }
  }
  return [...new Set(names)] as BenchLayer[];
}

/** Whether a benchmark switched `layer` off in `config` (never, for a server that serves users). */
export function benchLayerOff(
  config: { readonly benchLayersOff?: readonly BenchLayer[] },
  layer: BenchLayer,
): boolean {
  return config.benchLayersOff?.includes(layer) ?? false;
}
