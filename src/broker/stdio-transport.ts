// An SDK client Transport over a stdio MCP peer started through a guardian: the peer lives in its own
// process group, dies with the server, and can never send us a line over 1 MiB.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { childEnv } from "../guardian/env.ts";
import { GuardedProcess } from "../guardian/spawn.ts";
import { BROKER_PEER_CLOSE_GRACE_MS, BROKER_PEER_LINE_MAX_BYTES } from "../limits.ts";
import { sizeText } from "../text/size.ts";
import { decodeLine, encodeFrame, FrameTooLargeError, LineSplitter } from "../wire/lines.ts";
import type { StdioEntry } from "./config.ts";

export class GuardedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private peer: GuardedProcess | undefined;
  private closed = false;

  constructor(private readonly entry: StdioEntry) {}

  async start(): Promise<void> {
    const peer = new GuardedProcess(
      {
        program: this.entry.command,
        args: this.entry.args,
        env: childEnv(this.entry.env),
        cwd: this.entry.cwd,
      },
      { stderr: "ignore" },
    );
    this.peer = peer;
    // A command that cannot be started is reported by the guardian; fail the connect with it.
    await peer.childPid;
    void this.read(peer);
    void peer.exited.then(() => this.finish());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || !this.peer) throw new Error("MCP peer is closed");
    this.peer.stdin.write(encodeFrame(message, BROKER_PEER_LINE_MAX_BYTES));
    await this.peer.stdin.flush();
  }

  /** Ends the peer's input, gives it a moment to exit, then kills its group (GuardedProcess.stop). */
  async close(): Promise<void> {
    const peer = this.peer;
    if (!peer || this.closed) return;
    await peer.stop(BROKER_PEER_CLOSE_GRACE_MS);
    this.finish();
  }

  private async read(peer: GuardedProcess): Promise<void> {
    const splitter = new LineSplitter(BROKER_PEER_LINE_MAX_BYTES);
    try {
      for await (const chunk of peer.stdout) {
        for (const line of splitter.push(chunk)) {
          if (line.length === 0) continue;
          let message: JSONRPCMessage;
          try {
            message = JSONRPCMessageSchema.parse(JSON.parse(decodeLine(line)));
          } catch (error) {
            this.onerror?.(new Error(`MCP peer sent an invalid message: ${(error as Error).name}`));
            continue;
          }
          this.onmessage?.(message);
        }
      }
    } catch (error) {
      const message =
        error instanceof FrameTooLargeError
          ? `MCP peer frame exceeds ${sizeText(BROKER_PEER_LINE_MAX_BYTES)}`
          : "MCP peer output failed";
      this.onerror?.(new Error(message));
      void peer.stop(0);
    }
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }
}
