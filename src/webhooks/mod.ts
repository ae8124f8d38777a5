/**
 * Outgoing webhooks: HMAC-SHA256 signing, the durable dispatcher (retries with
 * exponential backoff, dead-letter queue), `webhooks test`, the delivery log
 * and the DLQ operations used by the CLI.
 *
 * Deliveries are at-least-once: each event and its deliveries are stored in
 * KV before `bus.emit()` resolves; attempts are scheduled in memory and
 * resumed from KV on the next `start()` after a crash or stop.
 *
 * @example
 * ```ts
 * import { createDispatcher } from "./src/webhooks/mod.ts";
 *
 * const dispatcher = createDispatcher({ store, bus, config });
 * await dispatcher.start();
 * // … bus.emit(...) …
 * await dispatcher.stop();
 * ```
 *
 * @module
 */
export {
  importSigningKey,
  importStandardKey,
  SIGNATURE_PREFIX,
  signPayload,
  signStandard,
  STANDARD_SECRET_PREFIX,
  standardKeyBytes,
  verifySignature,
  WebhookSigner,
} from "./signer.ts";
export type { AttemptSignatures, SigningKey } from "./signer.ts";
export { createDispatcher } from "./dispatcher.ts";
export {
  formatRetrySchedule,
  MAX_RETRIES,
  nextRetryDelayMs,
  parseRetryAfter,
  parseRetrySchedule,
  RETRY_JITTER,
  retryDelayMs,
  totalAttempts,
} from "./retry_policy.ts";
export type { RetryInput } from "./retry_policy.ts";
export type {
  AttemptObservation,
  DeliveryProblem,
  DisabledWebhook,
  Dispatcher,
  DispatcherConfig,
  DispatcherOptions,
  OrphanReport,
  StagedDeliveries,
  UndeliverableReason,
} from "./dispatcher.ts";
export { deliveryHeaders } from "./_send.ts";
export type { FetchLike } from "./_send.ts";
export {
  addWebhook,
  DEFAULT_ROTATION_OVERLAP_MS,
  disableWebhook,
  enableWebhook,
  GENERATED_SECRET_BYTES,
  generateSecret,
  getWebhook,
  listWebhooks,
  MAX_PREVIOUS_SECRETS,
  MAX_ROTATION_OVERLAP_MS,
  parseDuration,
  parseEventList,
  parseWebhookUrl,
  removeWebhook,
  rotateWebhookSecret,
  updateWebhook,
  validateSecret,
  webhookView,
} from "./endpoints.ts";
export type {
  AddWebhookInput,
  AddWebhookResult,
  EndpointOptions,
  RotateSecretOptions,
  RotateSecretResult,
  UpdateWebhookInput,
  WebhookView,
} from "./endpoints.ts";
export { testWebhook } from "./test_webhook.ts";
export type { TestWebhookOptions, TestWebhookResult } from "./test_webhook.ts";
export { recentAttempts } from "./delivery_log.ts";
export {
  countDlq,
  deleteDlqEntry,
  DLQ_FILE,
  getDlqEntry,
  listDlq,
  purgeDlq,
  replayDlq,
  writeDlqMirror,
} from "./dlq.ts";
export type {
  DlqEntry,
  ListDlqOptions,
  PurgeDlqOptions,
  ReplayDlqOptions,
  ReplayDlqResult,
  ReplayTarget,
} from "./dlq.ts";
export type { AttemptRecord, DeliveryLogEntry } from "../store/mod.ts";
export { DEDUPE_TTL_MS, IncomingRouter } from "./incoming.ts";
export {
  listFailedJobs,
  purgeFailedJobs,
  replayFailedJobs,
  showFailedJob,
} from "./incoming_failed.ts";
export type { FailedJobView, FailedReplayResult, FailedReplayTarget } from "./incoming_failed.ts";
export {
  bearerMatches,
  DEFAULT_SIGNATURE_HEADER,
  DEFAULT_TOLERANCE_S,
  expectedHeaders,
  isVerifyScheme,
  VERIFY_SCHEMES,
  verifyIncoming,
} from "./incoming_verify.ts";
export type { VerifiedRequest, VerifyIncomingOptions, VerifyScheme } from "./incoming_verify.ts";
export {
  IncomingMapping,
  parseCondition,
  parseHeaderEntry,
  parseMapEntry,
  parseRouteEntry,
  parseSource,
  validateMapping,
} from "./incoming_map.ts";
export type { Condition, IncomingMappingSpec, MappedCall, Source } from "./incoming_map.ts";
export type {
  IncomingAuditLog,
  IncomingPayloadObservation,
  IncomingRouterOptions,
} from "./incoming.ts";
