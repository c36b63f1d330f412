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

/** Names whose values must be whole numbers representable as u64; they get a dedicated message. */
const INTEGRAL_FIELDS = new Set(["expected_generation", "offset", "length"]);

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
  if (key && INTEGRAL_FIELDS.has(key) && typeof value === "number" && issue.type !== "strict_object") {
    throw new ProtocolError(`${key} must be a nonnegative integral u64`);
  }
  throw new ProtocolError(`Invalid arguments at ${pointer(issue.path)}`);
}
