/**
 * `toolgate webhooks …`: register, update, disable, enable, rotate, list,
 * remove and test outgoing webhooks (the logic is in
 * `src/webhooks/endpoints.ts`), and create incoming endpoints.
 *
 * The subcommands live by group: outgoing webhooks in
 * `_webhooks_outgoing.ts`, incoming endpoints in `_webhooks_incoming.ts`,
 * `list` and `show` in `_webhooks_display.ts` (their formatting in
 * `_webhooks_views.ts`); this module assembles the group.
 *
 * @module
 */
import type { Command } from "commander";
import { GatewayError } from "../errors/mod.ts";
import type { CliContext } from "./context.ts";
import { registerListCommand, registerShowCommand } from "./_webhooks_display.ts";
import { registerCreateCommand } from "./_webhooks_incoming.ts";
import { registerOutgoingCommands, registerTestCommand } from "./_webhooks_outgoing.ts";

export {
  parseIncomingPath,
  parseTolerance,
  parseVerifyScheme,
  RESERVED_PATHS,
} from "./_webhooks_incoming.ts";
export { parseEventList, parseWebhookUrl } from "./_webhooks_outgoing.ts";
export { publicIncoming, publicOutgoing } from "./_webhooks_views.ts";

/** Registers the `webhooks` command group. */
export function registerWebhooks(program: Command, context: CliContext): void {
  const webhooks = program.command("webhooks")
    .description("manage outgoing webhooks and incoming webhook endpoints");

  registerOutgoingCommands(webhooks, context);
  registerListCommand(webhooks, context);

  webhooks.command("remove")
    .description("remove an outgoing webhook (wh_…) or incoming endpoint (in_…)")
    .argument("<id>", "the webhook id")
    .action(async (id: string) => {
      const removed = await (await context.store()).webhooks.remove(id);
      if (!removed) {
        throw new GatewayError(
          "NOT_FOUND",
          `No webhook with id ${id}: see toolgate webhooks list`,
        );
      }
      context.print(`Removed ${removed} webhook ${id}`);
    });

  registerCreateCommand(webhooks, context);
  registerTestCommand(webhooks, context);
  registerShowCommand(webhooks, context);
}
