// The MCP stdio transport. Unlike the SDK's, it enforces the 1 MiB message limit on raw bytes before
// parsing. A bad line (too long, not UTF-8, not JSON, not JSON-RPC) is dropped whole and answered with a
// JSON-RPC error whose id is null: one bad line must never cost the sessions their state.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { CLIENT_WRITE_QUEUE_MESSAGES, CLIENT_WRITE_STALL_MS, MCP_MESSAGE_MAX_BYTES } from "../limits.ts";
import { log } from "../log.ts";
import { sizeText } from "../text/size.ts";
import { OVERSIZED, SkippingLineSplitter } from "../wire/lines.ts";
import { WriteQueue } from "../wire/write-queue.ts";

const encoder = new TextEncoder();
const utf8 = new TextDecoder("utf-8", { fatal: true });

const PARSE_ERROR = ErrorCode.ParseError;
const INVALID_REQUEST = ErrorCode.InvalidRequest;

type LineVerdict = { message: JSONRPCMessage } | { code: number; reason: string };

/** What one non-empty input line is: a message to serve, or the error to answer it with. */
function judge(line: Uint8Array | typeof OVERSIZED): LineVerdict {
  if (line === OVERSIZED) {
    return {
      code: INVALID_REQUEST,
      reason: `Message exceeds the ${MCP_MESSAGE_MAX_BYTES}-byte line limit; it was discarded unread`,
    };
  }
  let text: string;
  try {
    text = utf8.decode(line);
  } catch {
    return { code: PARSE_ERROR, reason: "Parse error: the line is not valid UTF-8; it was discarded" };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { code: PARSE_ERROR, reason: "Parse error: the line is not valid JSON; it was discarded" };
  }
  const parsed = JSONRPCMessageSchema.safeParse(value);
  if (!parsed.success) {
    return {
      code: INVALID_REQUEST,
      reason: "Invalid request: the line is not a JSON-RPC 2.0 message; it was discarded",
    };
  }
  return { message: parsed.data };
}

function isBlank(line: Uint8Array | typeof OVERSIZED): boolean {
  return line !== OVERSIZED && (line.length === 0 || (line.length === 1 && line[0] === 0x0d));
}

export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private closed = false;
  // Bounded, with a stall deadline: a client that stops reading must not grow our memory without limit.
  private readonly stdout = new WriteQueue(
    Bun.stdout.writer(),
    { lines: CLIENT_WRITE_QUEUE_MESSAGES, timeoutMs: CLIENT_WRITE_STALL_MS, what: "MCP client output" },
    () => {
      log.error(
        `the MCP client read none of our output for ${CLIENT_WRITE_STALL_MS / 1000} s; stopping as if it had closed`,
      );
      void this.close();
    },
  );

  async start(): Promise<void> {
    void this.read();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return;
    let bytes = encoder.encode(`${JSON.stringify(message)}\n`);
    if (bytes.length > MCP_MESSAGE_MAX_BYTES) {
      log.error(`dropping an outgoing message of ${bytes.length} bytes (limit ${MCP_MESSAGE_MAX_BYTES})`);
      if (!("id" in message) || message.id === undefined) return;
      const error = {
        jsonrpc: "2.0" as const,
        id: message.id,
        error: {
          code: ErrorCode.InternalError,
          message: `Response exceeds the ${sizeText(MCP_MESSAGE_MAX_BYTES)} message limit`,
        },
      };
      bytes = encoder.encode(`${JSON.stringify(error)}\n`);
    }
    await this.write(bytes);
  }

  /** Answers a discarded line. JSON-RPC wants `id: null` here, which the SDK's message type cannot say. */
  private async refuse(code: number, reason: string): Promise<void> {
    if (this.closed) return;
    await this.write(
      encoder.encode(`${JSON.stringify({ jsonrpc: "2.0", id: null, error: { code, message: reason } })}\n`),
    );
  }

  private async write(bytes: Uint8Array): Promise<void> {
    await this.stdout.push(bytes);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }

  private async read(): Promise<void> {
    const splitter = new SkippingLineSplitter(MCP_MESSAGE_MAX_BYTES);
    try {
      for await (const chunk of Bun.stdin.stream()) {
        for (const line of splitter.push(chunk)) {
          if (isBlank(line)) continue;
          const verdict = judge(line);
          if ("message" in verdict) {
            this.onmessage?.(verdict.message);
            continue;
          }
          log.warn(`discarded an input line: ${verdict.reason}`);
          void this.refuse(verdict.code, verdict.reason);
        }
      }
    } catch (error) {
      log.warn(`stdin closed: ${(error as Error).message}`);
    }
    await this.close();
  }
}
