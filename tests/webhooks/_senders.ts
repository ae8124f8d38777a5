/**
 * Signs requests the way each sender does: with the sender's own npm library
 * where there is one (GitHub's @octokit/webhooks-methods, Stripe's test
 * header helper, standardwebhooks), by the vendor's documented algorithm
 * otherwise (Slack, Shopify), and toolgate's own hmac-sha256.
 *
 * @module
 */
import { createHmac } from "node:crypto";
import { sign as githubSign } from "@octokit/webhooks-methods";
import Stripe from "stripe";
import { Webhook } from "standardwebhooks";
import type { VerifyScheme } from "../../src/webhooks/mod.ts";

const stripe = new Stripe("sk_test_unused");

/** A secret of the shape each sender hands out. */
export const SENDER_SECRETS: Record<VerifyScheme, string> = {
  "hmac-sha256": "s3cret",
  github: "gh-webhook-secret",
  stripe: "whsec_test_stripe_secret_123",
  slack: "8f742231b10e8888abcd99yyyzzz85a5",
  shopify: "shpss_0123456789abcdef",
  "standard-webhooks": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
};

/** What a signature covers besides the body. */
export interface SignOptions {
  /** Unix seconds the sender signs (schemes that sign one). */
  timestamp: number;
  /** Standard Webhooks' message id. @default "msg_1" */
  id?: string;
}

/**
 * The headers a sender would send with `body`, signed with `secret`.
 *
 * @param scheme The sender.
 * @param secret The signing secret.
 * @param body The exact body text sent.
 */
export async function signAs(
  scheme: VerifyScheme,
  secret: string,
  body: string,
  options: SignOptions,
): Promise<Record<string, string>> {
  const { timestamp, id = "msg_1" } = options;
  switch (scheme) {
    case "hmac-sha256":
      return {
        "X-Service-Signature": "sha256=" +
          createHmac("sha256", secret).update(body).digest("hex"),
      };
    case "github":
      return { "X-Hub-Signature-256": await githubSign(secret, body) };
    case "stripe":
      return {
        "Stripe-Signature": await stripe.webhooks.generateTestHeaderStringAsync({
          payload: body,
          secret,
          timestamp,
        }),
      };
    case "slack":
      // https://api.slack.com/authentication/verifying-requests-from-slack
      return {
        "X-Slack-Request-Timestamp": String(timestamp),
        "X-Slack-Signature": "v0=" +
          createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex"),
      };
    case "shopify":
      // https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
      return {
        "X-Shopify-Hmac-Sha256": createHmac("sha256", secret).update(body).digest("base64"),
      };
    case "standard-webhooks":
      return {
        "webhook-id": id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": new Webhook(secret).sign(id, new Date(timestamp * 1000), body),
      };
  }
}
