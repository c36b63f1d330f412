// The MCP stdio transport. Unlike the SDK's, it enforces the 1 MiB message limit on raw bytes before
// parsing: a line that is too long or not UTF-8 ends the input, and the server shuts down as on EOF.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { MCP_MESSAGE_MAX_BYTES } from "../limits.ts";
import { log } from "../log.ts";
import { decodeLine, LineSplitter } from "../wire/lines.ts";

const encoder = new TextEncoder();

export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private closed = false;
  private readonly stdout = Bun.stdout.writer();

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
        error: { code: -32603, message: "Response exceeds the 1 MiB message limit" },
      };
      bytes = encoder.encode(`${JSON.stringify(error)}\n`);
    }
    this.stdout.write(bytes);
    await this.stdout.flush();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }

  private async read(): Promise<void> {
    const splitter = new LineSplitter(MCP_MESSAGE_MAX_BYTES);
    try {
      for await (const chunk of Bun.stdin.stream()) {
        for (const line of splitter.push(chunk)) {
          if (line.length === 0 || (line.length === 1 && line[0] === 0x0d)) continue;
          // Undecodable bytes end the input (below); malformed JSON-RPC is reported and skipped.
          const text = decodeLine(line);
          let message: JSONRPCMessage;
          try {
            message = JSONRPCMessageSchema.parse(JSON.parse(text));
          } catch (error) {
            this.onerror?.(error as Error);
            continue;
          }
          this.onmessage?.(message);
        }
      }
    } catch (error) {
      log.warn(`stdin closed: ${(error as Error).message}`);
    }
    await this.close();
  }
}
