/**
 * The console's view of a secret rotation: the overlaps it offers, and when
 * each signature header changes for one of them (shown by the confirmation
 * before `rotateWebhookSecret`, by the same rules as the signer's).
 *
 * @module
 */
import {
  DEFAULT_ROTATION_OVERLAP_MS,
  MAX_PREVIOUS_SECRETS,
  type WebhookView,
} from "../../webhooks/mod.ts";

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** An overlap the confirmation offers. */
export interface OverlapChoice {
  /** The form value, as `--overlap` takes it (`24h`, `0`). */
  value: string;
  /** What the option says (`24 hours`). */
  label: string;
  ms: number;
}

function choice(ms: number): OverlapChoice {
  if (ms === 0) return { value: "0", label: "None", ms };
  if (ms % DAY_MS === 0 && ms > DAY_MS) {
    return { value: `${ms / DAY_MS}d`, label: `${ms / DAY_MS} days`, ms };
  }
  if (ms % HOUR_MS === 0) {
    const hours = ms / HOUR_MS;
    return { value: `${hours}h`, label: hours === 1 ? "1 hour" : `${hours} hours`, ms };
  }
  return { value: `${ms}ms`, label: `${ms} ms`, ms };
}

/** The overlaps offered, shortest first (one is `DEFAULT_ROTATION_OVERLAP_MS`); the last is none. */
export const OVERLAP_CHOICES: readonly OverlapChoice[] = [
  ...new Set([HOUR_MS, DEFAULT_ROTATION_OVERLAP_MS, 7 * DAY_MS]),
].filter((ms) => ms > 0).sort((a, b) => a - b).map(choice).concat(choice(0));

/** When a rotation changes the signature headers (epoch ms). */
export interface RotationTimes {
  /** Until when `webhook-signature` carries the replaced secret beside the new one; absent: it stops at once. */
  previousUntil?: number;
  /** When `X-Service-Signature` switches to the new secret; absent: at once. */
  switchAt?: number;
  /**
   * When the overlaps of earlier rotations, still running, end: until then
   * `X-Service-Signature` keeps a secret from before them. Absent: none runs.
   */
  runningUntil?: number;
}

/**
 * When `X-Service-Signature` switches to the webhook's current secret: at
 * the end of the last overlap still running at `now` (until then it is
 * keyed with the oldest previous secret still in its overlap).
 *
 * @returns Epoch ms, or `undefined` when it already uses the current secret.
 */
export function signatureSwitchAt(
  webhook: Pick<WebhookView, "previous_secrets">,
  now: number,
): number | undefined {
  const ends = webhook.previous_secrets.map((p) => Date.parse(p.expires_at)).filter((t) => t > now);
  return ends.length ? Math.max(...ends) : undefined;
}

/**
 * What rotating `webhook`'s secret at `now` with `overlapMs` would change,
 * and when (as `rotateWebhookSecret` keeps previous secrets: the replaced
 * one first, then those still in their overlap, the newest 5).
 */
export function rotationTimes(
  webhook: Pick<WebhookView, "has_secret" | "previous_secrets">,
  overlapMs: number,
  now: number,
): RotationTimes {
  const previousUntil = webhook.has_secret && overlapMs > 0 ? now + overlapMs : undefined;
  const running = webhook.previous_secrets.filter((p) => Date.parse(p.expires_at) > now);
  const after = (previousUntil === undefined ? running : [
    { expires_at: new Date(previousUntil).toISOString() },
    ...running,
  ]).slice(0, MAX_PREVIOUS_SECRETS);
  const switchAt = signatureSwitchAt({ previous_secrets: after }, now);
  const runningUntil = signatureSwitchAt(webhook, now);
  return {
    ...(previousUntil !== undefined ? { previousUntil } : {}),
    ...(switchAt !== undefined ? { switchAt } : {}),
    ...(runningUntil !== undefined ? { runningUntil } : {}),
  };
}
