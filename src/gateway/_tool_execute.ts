/**
 * Runs one attempt of a tool's `execute` under the tool's timeout, aborted
 * when the caller goes away.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { pausingWhileAsking } from "./catalog.ts";
import type { RegisteredTool } from "./_hosted.ts";
import type { CallOptions, ToolOutput } from "./types.ts";

const NOTHING = () => {};

/**
 * Runs `tool` on `input` once: each stretch of work gets the full timeout
 * (waiting for the caller's answer does not count).
 *
 * @throws {GatewayError} `TOOL_TIMEOUT`, `TOOL_EXECUTION_FAILED` for a result
 * that is not a JSON object, or what the tool throws.
 */
export async function executeTool(
  tool: RegisteredTool,
  input: Record<string, unknown>,
  sessionId: string,
  options: CallOptions,
): Promise<ToolOutput> {
  const { signal: callerSignal, onProgress, onLogMessage } = options;
  const controller = new AbortController();
  const onAbort = () => controller.abort(callerSignal?.reason);
  callerSignal?.addEventListener("abort", onAbort, { once: true });
  let cancelTimeout = NOTHING;
  let expire: (error: GatewayError) => void = NOTHING;
  const timeout = new Promise<never>((_, reject) => expire = reject);
  const armTimeout = () => {
    cancelTimeout = tool.timeouts.add(() => {
      const error = new GatewayError(
        "TOOL_TIMEOUT",
        `Tool ${tool.definition.name} timed out after ${tool.timeoutMs} ms`,
        { details: { tool: tool.definition.name, timeout_ms: tool.timeoutMs } },
      );
      controller.abort(error);
      expire(error);
    });
  };
  armTimeout();
  // Waiting for the caller's answer is not the tool's time: each stretch of work gets the full timeout.
  const caller = options.input && pausingWhileAsking(options.input, () => cancelTimeout(), () => {
    if (!controller.signal.aborted) armTimeout();
  });
  try {
    const run = tool.definition.execute(input, {
      ...tool.plugin.context,
      signal: controller.signal,
      sessionId,
      ...(onProgress ? { progress: onProgress } : {}),
      ...(onLogMessage ? { logMessage: onLogMessage } : {}),
      ...(caller ? { input: caller } : {}),
      ...(options.source ? { source: options.source } : {}),
    });
    const output = await Promise.race([run, timeout]);
    if (output === null || typeof output !== "object" || Array.isArray(output)) {
      throw new GatewayError(
        "TOOL_EXECUTION_FAILED",
        `Tool ${tool.definition.name} returned an invalid result: expected a JSON object`,
      );
    }
    return output;
  } finally {
    cancelTimeout();
    callerSignal?.removeEventListener("abort", onAbort);
  }
}
