// One NDJSON JSON-RPC line → a message, or the reason it is not one. Both ends that read JSON-RPC over
// pipes use it: our own stdin (server/stdio.ts) and stdio MCP peers (broker/stdio-transport.ts). Also the
// shape of a tools/call result, for the calls the broker sends a stdio peer itself (broker/direct-calls.ts).
import { CallToolResultSchema, JSONRPCMessageSchema } from "@modelcontextprotocol/core";
import { JSONRPC_INVALID_REQUEST, JSONRPC_PARSE_ERROR } from "../errors.ts";

/** A JSON-RPC 2.0 message as the SDK's own schema reads it (the same type both SDK packages take). */
export type JSONRPCMessage = ReturnType<typeof JSONRPCMessageSchema.parse>;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A message, or the JSON-RPC error code and reason for a line that is not one. */
export type LineVerdict = { message: JSONRPCMessage } | { code: number; reason: string };

export function parseJsonRpcLine(line: Uint8Array): LineVerdict {
  let text: string;
  try {
    text = utf8.decode(line);
  } catch {
    return {
      code: JSONRPC_PARSE_ERROR,
      reason: "Parse error: the line is not valid UTF-8; it was discarded",
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return {
      code: JSONRPC_PARSE_ERROR,
      reason: "Parse error: the line is not valid JSON; it was discarded",
    };
  }
  const common = commonMessage(value);
  if (common) return { message: common };
  const parsed = JSONRPCMessageSchema.safeParse(value);
  if (!parsed.success) {
    return {
      code: JSONRPC_INVALID_REQUEST,
      reason: "Invalid request: the line is not a JSON-RPC 2.0 message; it was discarded",
    };
  }
  return { message: parsed.data };
}

const REQUEST_KEYS = new Set(["jsonrpc", "id", "method", "params"]);
const NOTIFICATION_KEYS = new Set(["jsonrpc", "method", "params"]);
const RESULT_KEYS = new Set(["jsonrpc", "id", "result"]);

/**
 * The shapes nearly every line has, told apart without the schema (a union of four strict objects that
 * costs microseconds per message): a request or notification whose params, if any, are an object without
 * `_meta`, and a result response whose result is an object without `_meta`. The schema accepts exactly
 * these as they are (their parts are loose), so they are returned unchanged. Anything else, valid or
 * not, is undefined here and goes through the schema.
 */
function commonMessage(value: unknown): JSONRPCMessage | undefined {
  if (!isPlainObject(value) || value.jsonrpc !== "2.0") return undefined;
  const hasId = "id" in value;
  if (hasId && !(typeof value.id === "string" || Number.isSafeInteger(value.id))) return undefined;
  let allowed: Set<string>;
  if (typeof value.method === "string") {
    if (value.params !== undefined && !(isPlainObject(value.params) && !("_meta" in value.params)))
      return undefined;
    allowed = hasId ? REQUEST_KEYS : NOTIFICATION_KEYS;
  } else if (hasId && isPlainObject(value.result) && !("_meta" in value.result)) {
    allowed = RESULT_KEYS;
  } else {
    return undefined;
  }
  for (const key in value) if (!allowed.has(key)) return undefined;
  return value as JSONRPCMessage;
}

/** An empty line, or one holding only the CR of a CRLF ending: skipped, never answered. */
export function isBlankLine(line: Uint8Array): boolean {
  return line.length === 0 || (line.length === 1 && line[0] === 0x0d);
}

/** Result keys of other MCP result families: a result carrying one and no content is no tools/call success. */
const FOREIGN_RESULT_KEYS = ["task", "inputRequests", "requestState"];

/**
 * A tools/call result as the revisions up to 2025-11-25 define it (content defaults to none, and
 * structuredContent, when present, is an object), or undefined for anything else.
 */
export function parseCallToolResult(value: unknown): Record<string, unknown> | undefined {
  if (!isPlainObject(value)) return undefined;
  if (value.content === undefined && FOREIGN_RESULT_KEYS.some((key) => key in value)) return undefined;
  if (value.structuredContent !== undefined && !isPlainObject(value.structuredContent)) return undefined;
  const parsed = CallToolResultSchema.safeParse(value);
  return parsed.success ? (parsed.data as Record<string, unknown>) : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
