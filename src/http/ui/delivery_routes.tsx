/** @jsxImportSource hono/jsx */
/**
 * The console's outgoing-delivery pages: the webhooks (test, disable,
 * enable, rotate a secret) and the dead-letter queue (browse, replay).
 *
 * @module
 */
import type { EgressPolicy } from "../../egress/mod.ts";
import {
  DEFAULT_ROTATION_OVERLAP_MS,
  disableWebhook,
  enableWebhook,
  getDlqEntry,
  getWebhook,
  listDlq,
  listWebhooks,
  parseDuration,
  recentAttempts,
  replayDlq,
  rotateWebhookSecret,
  testWebhook,
} from "../../webhooks/mod.ts";
import {
  DlqPage,
  DlqRecordPage,
  replayFlash,
  RotateSecretPage,
  secretFlash,
  testFlash,
  WebhooksPage,
} from "./delivery_views.tsx";
import { type ConsolePages, type Ctx, field, html } from "./_page_kit.tsx";
import { UI } from "./paths.ts";
import { OVERLAP_CHOICES, rotationTimes, signatureSwitchAt } from "./rotation.ts";
import type { Flash } from "./views.tsx";

/** Records per dead-letter page. */
const DLQ_PAGE = 50;

/** Mounts `/ui/webhooks…` and `/ui/dlq…` on `pages.app`; webhook tests send through `egress`. */
export function mountDeliveryPages(pages: ConsolePages, egress: EgressPolicy | undefined): void {
  const { app, store, clock, frameOf } = pages;

  const webhooksPage = async (c: Ctx, flash?: Flash) => {
    const hooks = await listWebhooks(store);
    const rows = await Promise.all(
      hooks.map(async (webhook) => ({
        webhook,
        attempts: await recentAttempts(store, webhook.id),
      })),
    );
    return html(
      c,
      <WebhooksPage frame={frameOf(c, `${UI}/webhooks`)} rows={rows} flash={flash} />,
    );
  };
  app.get(`${UI}/webhooks`, (c) => webhooksPage(c));
  app.post(`${UI}/webhooks/:id/test`, async (c) => {
    const result = await testWebhook(store, c.req.param("id"), { egress });
    return webhooksPage(c, testFlash(result));
  });
  app.post(`${UI}/webhooks/:id/disable`, async (c) => {
    const hook = await disableWebhook(store, c.req.param("id"), "disabled in the console");
    return webhooksPage(c, {
      kind: "ok",
      text: `Disabled ${hook.url}: its events wait in the dead-letter queue`,
    });
  });
  app.post(`${UI}/webhooks/:id/enable`, async (c) => {
    const { webhook } = await enableWebhook(store, c.req.param("id"));
    return webhooksPage(c, { kind: "ok", text: `Enabled ${webhook.url}` });
  });
  // Rotating asks first: the Rotate button opens this confirmation, saying
  // when each signature header switches for each overlap offered.
  const rotatePage = async (c: Ctx, id: string) => {
    const at = clock();
    const webhook = await getWebhook(store, id, { now: () => at });
    const options = OVERLAP_CHOICES.map((choice) => ({
      choice,
      times: rotationTimes(webhook, choice.ms, at),
      checked: choice.ms === DEFAULT_ROTATION_OVERLAP_MS,
    }));
    const path = `${UI}/webhooks/${encodeURIComponent(webhook.id)}/rotate`;
    return html(
      c,
      <RotateSecretPage
        frame={frameOf(c, path)}
        webhook={webhook}
        options={options}
        runningUntil={signatureSwitchAt(webhook, at)}
      />,
    );
  };
  app.get(`${UI}/webhooks/:id/rotate`, (c) => rotatePage(c, c.req.param("id")));
  app.post(`${UI}/webhooks/:id/rotate`, async (c) => {
    const body = await c.req.parseBody();
    // A form without the confirmation's field (a page from before it) only asks.
    if (field(body, "confirm") !== "rotate") return rotatePage(c, c.req.param("id"));
    const raw = field(body, "overlap");
    const overlapMs = raw === undefined
      ? DEFAULT_ROTATION_OVERLAP_MS
      : parseDuration(raw, "overlap");
    const at = clock();
    const id = c.req.param("id");
    const before = await getWebhook(store, id, { now: () => at });
    const { webhook, secret } = await rotateWebhookSecret(store, id, {
      now: () => at,
      overlapMs,
    });
    const times = rotationTimes(before, overlapMs, at);
    return webhooksPage(c, secretFlash(webhook.url, secret, times, before.has_secret));
  });

  const dlqPage = async (c: Ctx, flash?: Flash) => {
    const webhook = c.req.query("webhook") || undefined;
    const after = c.req.query("after") || undefined;
    const records = await listDlq(store, { webhook, after, limit: DLQ_PAGE + 1 });
    const page = records.slice(0, DLQ_PAGE);
    const next = records.length > DLQ_PAGE ? page.at(-1)!.dlq_id : null;
    const params = new URLSearchParams();
    if (webhook) params.set("webhook", webhook);
    if (after) params.set("after", after);
    const path = `${UI}/dlq${params.size ? `?${params}` : ""}`;
    return html(
      c,
      <DlqPage
        frame={frameOf(c, path)}
        records={page}
        webhook={webhook}
        next={next}
        flash={flash}
      />,
    );
  };
  app.get(`${UI}/dlq`, (c) => dlqPage(c));
  app.post(`${UI}/dlq/replay`, async (c) => {
    const webhook = c.req.query("webhook");
    const result = await replayDlq(store, webhook ? { webhook } : "all");
    return dlqPage(c, replayFlash(result));
  });
  app.get(`${UI}/dlq/:id`, async (c) => {
    const record = await getDlqEntry(store, c.req.param("id"));
    const path = `${UI}/dlq/${encodeURIComponent(record.dlq_id)}`;
    return html(c, <DlqRecordPage frame={frameOf(c, path)} record={record} />);
  });
  app.post(`${UI}/dlq/:id/replay`, async (c) => {
    const result = await replayDlq(store, c.req.param("id"));
    return dlqPage(c, replayFlash(result));
  });
}
