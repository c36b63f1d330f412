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
  const parsed = JSONRPCMessageSchema.safeParse(value);
  if (!parsed.success) {
    return {
      code: JSONRPC_INVALID_REQUEST,
      reason: "Invalid request: the line is not a JSON-RPC 2.0 message; it was discarded",
    };
  }
  return { message: parsed.data };
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
