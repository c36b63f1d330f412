// One NDJSON JSON-RPC line → a message, or the reason it is not one. Both ends that read JSON-RPC over
// pipes use it: our own stdin (server/stdio.ts) and stdio MCP peers (broker/stdio-transport.ts).
import { JSONRPCMessageSchema } from "@modelcontextprotocol/core";
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
