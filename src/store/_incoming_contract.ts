/**
 * What the storage contract fixes alike for both adapters' incoming jobs:
 * the checks of a claim and of claim options, with the same messages.
 * Private to `src/store`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { ClaimIncomingOptions, IncomingClaim } from "./records.ts";

/** Refuses a claim that cannot be held. */
export function checkClaim(claim: IncomingClaim | undefined): void {
  if (claim === undefined) return;
  if (typeof claim.owner !== "string" || claim.owner === "") {
    throw new GatewayError("INTERNAL", "Cannot claim incoming jobs: the owner is empty");
  }
  if (typeof claim.until !== "number" || !Number.isFinite(claim.until)) {
    throw new GatewayError("INTERNAL", `Invalid until ${claim.until}: use epoch milliseconds`);
  }
}

/** Refuses claim options that cannot claim anything. */
export function checkClaimOptions(options: ClaimIncomingOptions): void {
  const { now, limit } = options;
  checkClaim(options);
  if (!Number.isInteger(limit) || limit < 1) {
    throw new GatewayError("INTERNAL", `Invalid limit ${limit}: use an integer of 1 or more`);
  }
  if (typeof now !== "number" || !Number.isFinite(now)) {
    throw new GatewayError("INTERNAL", `Invalid now ${now}: use epoch milliseconds`);
  }
}
