/**
 * The service version; its one source is `deno.json`.
 *
 * @module
 */
import denoJson from "../deno.json" with { type: "json" };

/** The service version, `<major>.<minor>.<patch>`. */
export const VERSION: string = denoJson.version;
