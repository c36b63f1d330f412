// Tool schemas are valibot schemas; this module turns them into the published JSON Schemas and turns
// input validation failures into the protocol error docs/tools.md "Errors" describes (or, for a byte limit, into a
// LIMIT_EXCEEDED tool result).
import { toJsonSchema } from "@valibot/to-json-schema";
import * as v from "valibot";
import { ProtocolError, ReplError } from "../errors.ts";

export type JsonSchema = { type: "object"; [key: string]: unknown };

export function jsonSchemaOf(schema: v.GenericSchema): JsonSchema {
  const { $schema: _ignored, ...rest } = toJsonSchema(schema, { errorMode: "ignore" }) as Record<
    string,
    unknown
  >;
  return rest as JsonSchema;
}

/**
 * A tool's published outputSchema. A top-level union (success | failure) is published as
 * `{"type":"object","oneOf":[...]}`, the form MCP clients validate against; its branches must exclude each other.
 */
export function outputSchemaOf(schema: v.GenericSchema): JsonSchema {
  if (schema.type === "union" && "options" in schema && Array.isArray(schema.options)) {
    return { type: "object", oneOf: schema.options.map((option: v.GenericSchema) => jsonSchemaOf(option)) };
  }
  return jsonSchemaOf(schema);
}

function pointer(path: v.IssuePathItem[] | undefined): string {
  if (!path?.length) return "/";
  return path.map((item) => `/${String(item.key).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

/**
 * Names whose values must be whole numbers representable as u64. A number that is not one (a fraction,
 * a negative, 2^64 or more) gets a dedicated message; a u64 that breaks the field's own bound is an
 * ordinary schema failure (`Invalid arguments at /length`).
 */
const INTEGRAL_FIELDS = new Set(["expected_generation", "offset", "length"]);

/** JSON numbers arrive as doubles: the largest below 2^64 is the last one a u64 can be. */
export function isU64(value: number): boolean {
  return Number.isInteger(value) && value >= 0 && value < 2 ** 64;
}

export function parseArguments<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  // Absent arguments mean none; anything present must be an object (null and arrays are not).
  if (input !== undefined && (input === null || typeof input !== "object" || Array.isArray(input))) {
    throw new ProtocolError("Invalid arguments at /");
  }
  const result = v.safeParse(schema, input ?? {});
  if (result.success) return result.output;
  const issue = result.issues[0];
  const key = issue.path?.length === 1 ? String(issue.path[0]?.key) : undefined;
  const value = issue.input;
  // A string within its length in characters but over its size in bytes is a limit the agent can act
  // on (a shorter value), not malformed input: it is a tool result with the schema's own message.
  if (issue.type === "max_bytes") throw new ReplError("LIMIT_EXCEEDED", issue.message);
  if (
    key &&
    INTEGRAL_FIELDS.has(key) &&
    issue.type !== "strict_object" &&
    typeof value === "number" &&
    !isU64(value)
  ) {
    throw new ProtocolError(`${key} must be a nonnegative integral u64`);
  }
  throw new ProtocolError(`Invalid arguments at ${pointer(issue.path)}`);
}
