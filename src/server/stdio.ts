// The MCP stdio transport. Unlike the SDK's, it enforces the 1 MiB message limit on raw bytes before
// parsing. A bad line (too long, not UTF-8, not JSON, not JSON-RPC) is dropped whole and answered with a
// JSON-RPC error whose id is null: one bad line must never cost the sessions their state.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { CLIENT_WRITE_QUEUE_MESSAGES, CLIENT_WRITE_STALL_MS, MCP_MESSAGE_MAX_BYTES } from "../limits.ts";
import { log } from "../log.ts";
import { sizeText } from "../text/size.ts";
import { isBlankLine, type LineVerdict, parseJsonRpcLine } from "../wire/jsonrpc.ts";
import { OVERSIZED, SkippingLineSplitter } from "../wire/lines.ts";
import { WriteQueue } from "../wire/write-queue.ts";

const encoder = new TextEncoder();
/** What one input line is: a message to serve, or the error to answer it with. */
function judge(line: Uint8Array | typeof OVERSIZED): LineVerdict {
  if (line === OVERSIZED) {
    return {
      code: ErrorCode.InvalidRequest,
      reason: `Message exceeds the ${MCP_MESSAGE_MAX_BYTES}-byte line limit; it was discarded unread`,
    };
  }
  return parseJsonRpcLine(line);
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
          if (line !== OVERSIZED && isBlankLine(line)) continue;
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
