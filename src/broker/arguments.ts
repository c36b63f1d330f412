// Checks before a call is dispatched: the arguments fit the budget, the peer's input schema is small
// and simple enough to validate in bounded time, and the arguments satisfy it. Messages never quote
// the values.
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/client/validators/ajv";
import { ReplError } from "../errors.ts";
import {
  BROKER_ARGUMENT_MAX_BYTES,
  BROKER_ARGUMENT_MAX_DEPTH,
  BROKER_ARGUMENT_MAX_NODES,
  BROKER_COMPILED_SCHEMAS_MAX,
  BROKER_SCHEMA_MAX_BRANCHES,
  BROKER_SCHEMA_MAX_BYTES,
  BROKER_SCHEMA_MAX_DEPTH,
  BROKER_SCHEMA_MAX_NODES,
  BROKER_SCHEMA_MAX_PATTERN_CHARS,
} from "../limits.ts";
import { sizeText } from "../text/size.ts";
import { utf8Bytes } from "../text/utf8.ts";

/** Depth and node count of a JSON value, stopping early once a limit is passed. */
function shape(value: unknown, maxDepth: number, maxNodes: number): { depth: number; nodes: number } {
  let nodes = 0;
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop() as [unknown, number];
    nodes++;
    deepest = Math.max(deepest, depth);
    if (nodes > maxNodes || deepest > maxDepth) break;
    if (item && typeof item === "object") {
      for (const child of Object.values(item)) stack.push([child, depth + 1]);
    }
  }
  return { depth: deepest, nodes };
}

export function checkArguments(args: Record<string, unknown>): void {
  const { depth, nodes } = shape(args, BROKER_ARGUMENT_MAX_DEPTH, BROKER_ARGUMENT_MAX_NODES);
  if (depth > BROKER_ARGUMENT_MAX_DEPTH || nodes > BROKER_ARGUMENT_MAX_NODES) {
    throw new ReplError(
      "LIMIT_EXCEEDED",
      `MCP arguments exceed depth ${BROKER_ARGUMENT_MAX_DEPTH} or ${BROKER_ARGUMENT_MAX_NODES} values; send less per call`,
    );
  }
  if (utf8Bytes(JSON.stringify(args)) > BROKER_ARGUMENT_MAX_BYTES) {
    throw new ReplError(
      "LIMIT_EXCEEDED",
      `MCP arguments exceed the ${sizeText(BROKER_ARGUMENT_MAX_BYTES)} budget; use an artifact or a file instead`,
    );
  }
}

function schemaWithinBounds(schema: unknown): boolean {
  if (utf8Bytes(JSON.stringify(schema)) > BROKER_SCHEMA_MAX_BYTES) return false;
  const { depth, nodes } = shape(schema, BROKER_SCHEMA_MAX_DEPTH, BROKER_SCHEMA_MAX_NODES);
  if (depth > BROKER_SCHEMA_MAX_DEPTH || nodes > BROKER_SCHEMA_MAX_NODES) return false;
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const node = stack.pop();
    if (!node || typeof node !== "object") continue;
    const record = node as Record<string, unknown>;
    for (const key of ["anyOf", "oneOf", "allOf"]) {
      const branches = record[key];
      if (Array.isArray(branches) && branches.length > BROKER_SCHEMA_MAX_BRANCHES) return false;
    }
    if (typeof record.pattern === "string" && record.pattern.length > BROKER_SCHEMA_MAX_PATTERN_CHARS)
      return false;
    if (typeof record.$ref === "string" && !record.$ref.startsWith("#")) return false;
    stack.push(...Object.values(record));
  }
  return true;
}

let validator: Promise<AjvJsonSchemaValidator> | undefined;
/** Compiled checks by schema text: catalogues are re-fetched, so the same schema returns as a new object. */
const compiled = new Map<string, (input: unknown) => boolean>();
/** The same, by schema object: a cached catalogue hands out the same object call after call. */
let bySchema = new WeakMap<object, (input: unknown) => boolean>();

export async function validateAgainstSchema(schema: unknown, args: Record<string, unknown>): Promise<void> {
  if (!schema || typeof schema !== "object") return;
  let check = bySchema.get(schema);
  if (!check) {
    check = await compile(schema);
    bySchema.set(schema, check);
  }
  if (!check(args)) {
    throw new ReplError(
      "INVALID_ARGUMENT",
      "MCP arguments violate inputSchema; inspect mcp.help(server, tool). Values are omitted from diagnostics",
    );
  }
}

/** Loaded on first use: the validator compiles a large library the server does not otherwise need. */
async function compile(schema: object): Promise<(input: unknown) => boolean> {
  if (!schemaWithinBounds(schema)) {
    throw new ReplError(
      "LIMIT_EXCEEDED",
      "MCP tool inputSchema exceeds the broker's validation bounds; the call was not sent",
    );
  }
  const key = JSON.stringify(schema);
  const known = compiled.get(key);
  if (known) return known;
  if (compiled.size >= BROKER_COMPILED_SCHEMAS_MAX) {
    // The validator keeps every schema it compiled; starting a new one is how its memory is released.
    compiled.clear();
    bySchema = new WeakMap();
    validator = undefined;
  }
  // One shared import: concurrent first calls must not each start loading the module.
  validator ??= import("@modelcontextprotocol/client/validators/ajv").then(
    ({ AjvJsonSchemaValidator }) => new AjvJsonSchemaValidator(),
  );
  const ajv = await validator;
  let validate: ReturnType<typeof ajv.getValidator>;
  try {
    validate = ajv.getValidator(schema as Parameters<typeof ajv.getValidator>[0]);
  } catch {
    throw new ReplError("MCP_PROTOCOL", "MCP tool inputSchema cannot be compiled; the call was not sent");
  }
  const check = (input: unknown) => validate(input).valid;
  compiled.set(key, check);
  return check;
}
