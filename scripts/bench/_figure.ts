/**
 * One figure of the bench report: what the scenarios return and the report
 * prints. Private to `scripts/bench` (a leaf: the scenarios and the runner
 * both use it).
 *
 * @module
 */

/** One figure: toolgate's value, its baseline, the ratio and the target. */
export interface Figure {
  scenario: string;
  /** What is measured, e.g. `req/s`. */
  figure: string;
  toolgate: number;
  /** Name of the baseline, e.g. `bare Hono`. */
  baseline_name: string;
  baseline: number | null;
  /** `toolgate / baseline` (or the difference for `added` figures). */
  ratio: number | null;
  /** Target, as text, e.g. `≥ 0.5×`; empty when none. */
  target: string;
  /** Whether the target is met; `null` without a target. */
  met: boolean | null;
}
