/**
 * A small parser of the Prometheus text format 0.0.4, independent of
 * prom-client, for checking what `/metrics` serves.
 *
 * @module
 */

/** One sample line: `name{label="value",…} value`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A parsed scrape: samples, and each metric family's `# TYPE`. */
export interface Scrape {
  samples: Sample[];
  types: Map<string, string>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * Parses a scrape.
 *
 * @throws {Error} naming the line that is neither a comment nor a sample.
 */
export function parseScrape(text: string): Scrape {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ");
      types.set(name, type);
      continue;
    }
    if (line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`Not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? "").matchAll(LABEL)) {
      labels[key] = value.replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return { samples, types };
}

/**
 * The value of the one sample named `name` whose labels include `labels`;
 * `undefined` when there is none.
 *
 * @throws {Error} when several samples match.
 */
export function sampleValue(
  scrape: Scrape,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const found = scrape.samples.filter((sample) =>
    sample.name === name &&
    Object.entries(labels).every(([key, value]) => sample.labels[key] === value)
  );
  if (found.length > 1) {
    throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  }
  return found[0]?.value;
}

/** The sum of the samples named `name` whose labels include `labels`. */
export function sampleSum(
  scrape: Scrape,
  name: string,
  labels: Record<string, string> = {},
): number {
  return scrape.samples
    .filter((sample) =>
      sample.name === name &&
      Object.entries(labels).every(([key, value]) => sample.labels[key] === value)
    )
    .reduce((sum, sample) => sum + sample.value, 0);
}
