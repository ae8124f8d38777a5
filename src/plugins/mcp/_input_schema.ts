/**
 * Argument validation of proxied MCP tools: the upstream's JSON Schema,
 * checked with Ajv inside a permissive zod object schema, so the gateway's
 * pipeline reports `TOOL_INPUT_INVALID` with field paths before any call
 * leaves the process.
 *
 * @module
 */
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { z } from "zod";

/** A JSON Schema validator shared by the tools of one upstream. */
export function createAjv(): Ajv {
  return new Ajv({
    strict: false,
    allErrors: true,
    validateSchema: false,
    validateFormats: false,
  });
}

/**
 * The zod schema of a proxied tool's arguments: any JSON object, refined by
 * the upstream's JSON Schema. A schema Ajv cannot compile is left to the
 * upstream to enforce (and reported through `log`).
 */
export function argumentsSchema(
  ajv: Ajv,
  jsonSchema: Record<string, unknown>,
  log: (message: string) => void,
): z.ZodType<Record<string, unknown>> {
  let validate: ValidateFunction | undefined;
  try {
    const { $schema: _schema, $id: _id, ...rest } = jsonSchema;
    validate = ajv.compile(rest);
  } catch (error) {
    log(`input schema not checked locally: ${(error as Error).message}`);
  }
  return z.record(z.string(), z.unknown()).superRefine((args, context) => {
    if (!validate || validate(args)) return;
    for (const error of validate.errors ?? []) {
      context.addIssue({ code: "custom", path: pathOf(error), message: messageOf(error) });
    }
  });
}

function pathOf(error: ErrorObject): (string | number)[] {
  const path: (string | number)[] = error.instancePath === ""
    ? []
    : error.instancePath.slice(1).split("/").map((part) =>
      part.replaceAll("~1", "/").replaceAll("~0", "~")
    );
  const params = error.params as Record<string, unknown>;
  if (error.keyword === "required" && typeof params.missingProperty === "string") {
    path.push(params.missingProperty);
  } else if (
    error.keyword === "additionalProperties" && typeof params.additionalProperty === "string"
  ) {
    path.push(params.additionalProperty);
  }
  return path;
}

function messageOf(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "required":
      return "Required property is missing";
    case "additionalProperties":
      return "Unknown property: not in the tool's input schema";
    case "enum":
      return `Must be one of ${
        (params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(", ")
      }`;
    default: {
      const message = error.message ?? `fails ${error.keyword}`;
      return message.charAt(0).toUpperCase() + message.slice(1);
    }
  }
}
