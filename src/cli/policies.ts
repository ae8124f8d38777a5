/**
 * `toolgate policies list|add|remove|test`: the policy rules of config and
 * the store, adding and removing stored ones (running servers follow within
 * `plugins.upstream_settings.poll_ms`, at once on PostgreSQL), and which
 * rule decides a call.
 *
 * @module
 */
import type { Command } from "commander";
import { GatewayError } from "../errors/mod.ts";
import type { PolicyCall, PolicyDecision } from "../gateway/mod.ts";
import { builtinPlugins } from "../plugins/mod.ts";
import {
  addPolicy,
  listPolicies,
  loadPolicies,
  removePolicy,
  type RuleTrace,
  testCaller,
} from "../policies/mod.ts";
import { type CliContext, table, usage } from "./context.ts";
import { findServer } from "./remote.ts";
import { parseToolArgs } from "./tools.ts";

function parseRule(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch (error) {
    throw usage(
      `Invalid --rule: not JSON (${(error as Error).message}); expected an object such as ` +
        `'{"name": "no-deletes", "tools": ["*_delete"], "effect": "deny"}'`,
    );
  }
}

/** What the CLI knows of a tool without a server: a built-in's plugin and annotations, else its prefix. */
function offlineFacts(tool: string): Pick<PolicyCall, "plugin" | "annotations"> {
  for (const plugin of builtinPlugins()) {
    const found = plugin.tools.find((t) => t.name === tool);
    if (found) {
      return {
        plugin: plugin.name,
        annotations: found.mcpListing?.annotations as Record<string, unknown> | undefined,
      };
    }
  }
  const at = tool.indexOf("__");
  return { plugin: at > 0 ? tool.slice(0, at) : "" };
}

function effectOf(decision: PolicyDecision | undefined | null): string {
  if (!decision) return "allow (no rule matched)";
  const reason = decision.reason ? `: ${decision.reason}` : "";
  return `${decision.effect} by ${decision.policy} (${decision.source})${reason}`;
}

/** Registers the `policies` command group. */
export function registerPolicies(program: Command, context: CliContext): void {
  const policies = program.command("policies")
    .description("policy rules deciding tool calls: allow, deny, require approval");

  policies.command("list")
    .description("list the rules in the order they are matched (config's, then the store's)")
    .option("--json", "print them as JSON")
    .action(async (options: { json?: boolean }) => {
      const config = await context.config();
      const views = await listPolicies(config.policies, await context.store());
      if (options.json) {
        context.printJson(views);
        return;
      }
      if (!views.length) {
        context.print(
          `No policies: every call a caller may make is allowed. Add one with: toolgate policies add --rule '{"name": "…", "effect": "deny", …}'`,
        );
        return;
      }
      context.print(table(
        ["NAME", "SOURCE", "EFFECT", "MATCHES"],
        views.map((view) => {
          const { name: _name, effect, reason: _reason, ...matchers } = view.rule;
          return [view.name, view.source, String(effect), JSON.stringify(matchers)];
        }),
      ));
    });

  policies.command("add")
    .description("store a rule after the stored ones (running servers use it)")
    .requiredOption("--rule <json>", "the rule as JSON ('-': read it from stdin)")
    .option("--position <n>", "where it goes among the stored rules (lower first)")
    .option("--json", "print it as JSON")
    .action(async (options: { rule: string; position?: string; json?: boolean }) => {
      const raw = options.rule === "-" ? await context.io.readStdin() : options.rule;
      const position = options.position === undefined ? undefined : Number(options.position);
      if (position !== undefined && !Number.isSafeInteger(position)) {
        throw usage(`Invalid --position ${options.position}: expected a whole number`);
      }
      const config = await context.config();
      const view = await addPolicy(
        config.policies,
        await context.store(),
        parseRule(raw),
        position,
      );
      if (options.json) context.printJson(view);
      else context.print(`Added policy ${view.name} (position ${view.position})`);
    });

  policies.command("remove")
    .description("remove a stored rule")
    .argument("<name>", "its name")
    .action(async (name: string) => {
      const config = await context.config();
      await removePolicy(config.policies, await context.store(), name);
      context.print(`Removed policy ${name}`);
    });

  policies.command("test")
    .description("show which rule decides a call, and why (nothing runs)")
    .requiredOption("--tool <name>", "the tool")
    .option("--args <json>", "its arguments", "{}")
    .option(
      "--as <caller>",
      "admin, local (default), oauth:<subject>[@client] or an API key's id or name",
    )
    .option("--scopes <list>", "an OAuth caller's scopes, comma-separated")
    .option("--server <name>", "the virtual server the call comes through")
    .option("--transport <name>", "rest (default), mcp-http, mcp-stdio, cli, webhook", "rest")
    .option("--url <url>", "ask this running server (which knows every upstream's tools)")
    .option("--json", "print {decision, trace} as JSON")
    .action(async (options: {
      tool: string;
      args: string;
      as?: string;
      scopes?: string;
      server?: string;
      transport: string;
      url?: string;
      json?: boolean;
    }) => {
      const args = parseToolArgs(options.args);
      const scopes = options.scopes?.split(",").map((s) => s.trim()).filter(Boolean) ?? [];
      const note = (message: string) => context.io.stderr(`toolgate: note: ${message}\n`);
      const server = await findServer(context, options.url, note);
      let result: { decision: PolicyDecision | null | undefined; trace: RuleTrace[] };
      if (server) {
        const response = await fetch(`${server.url}/policies/test`, {
          method: "POST",
          headers: { ...server.headers, "content-type": "application/json" },
          body: JSON.stringify({
            tool: options.tool,
            args,
            ...(options.as ? { as: options.as } : {}),
            scopes,
            ...(options.server ? { server: options.server } : {}),
            transport: options.transport,
          }),
        });
        const body = await response.json();
        if (!response.ok) {
          throw new GatewayError(body.error?.code ?? "INTERNAL", body.error?.message ?? "failed");
        }
        result = body;
      } else {
        const config = await context.config();
        const store = await context.store();
        const rules = await loadPolicies(config.policies, await store.policies.list());
        const caller = await testCaller(store, options.as, scopes);
        result = rules.explain({
          tool: options.tool,
          ...offlineFacts(options.tool),
          caller,
          server: options.server ?? caller.server,
          transport: options.transport,
          args,
        });
      }
      if (options.json) {
        context.printJson({ decision: result.decision ?? null, trace: result.trace });
        return;
      }
      for (const step of result.trace) {
        context.print(`${step.matched ? "→" : " "} ${step.name} (${step.source}): ${step.why}`);
      }
      context.print(`Decision: ${effectOf(result.decision)}`);
    });
}
