/**
 * Pinning of upstream definitions: what each upstream's tools, prompts and
 * resource templates were when first seen, and the quarantine of one that
 * changes until an administrator decides.
 *
 * @module
 */
export { ToolPins } from "./pins.ts";
export type { PinAudit, PinDiff, PinningMode, PinView, ToolPinsOptions } from "./pins.ts";
export {
  changedFields,
  definitionDiff,
  pinHash,
  PINNED_FIELDS,
  pinnedDefinition,
} from "./definition.ts";
