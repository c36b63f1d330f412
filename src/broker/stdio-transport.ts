// An SDK client Transport over a stdio MCP peer started through a guardian: the peer lives in its own
// process group, dies with the server, and can never send us a line over 1 MiB.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { childEnv } from "../guardian/env.ts";
import { GuardedProcess } from "../guardian/spawn.ts";
import {
  BROKER_PEER_CLOSE_GRACE_MS,
  BROKER_PEER_LINE_MAX_BYTES,
  BROKER_PEER_WRITE_QUEUE_MESSAGES,
  BROKER_PEER_WRITE_STALL_MS,
} from "../limits.ts";
import { sizeText } from "../text/size.ts";
import { isBlankLine, parseJsonRpcLine } from "../wire/jsonrpc.ts";
import { encodeFrame, FrameTooLargeError, LineSplitter } from "../wire/lines.ts";
import { WriteQueue } from "../wire/write-queue.ts";
import type { StdioEntry } from "./config.ts";

const PEER_INVALID = "MCP peer sent invalid data (a line that is not JSON-RPC) and was stopped";
const PEER_TOO_LARGE = `MCP peer frame exceeds ${sizeText(BROKER_PEER_LINE_MAX_BYTES)}; the peer was stopped`;
const PEER_STALLED = `MCP peer read none of its input for ${BROKER_PEER_WRITE_STALL_MS / 1000} s and was stopped`;

export class GuardedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Why the peer was stopped, when it misbehaved. */
  failure: string | undefined;
  private peer: GuardedProcess | undefined;
  private writer: WriteQueue | undefined;
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
    // Bounded, with a stall deadline: a peer that stops reading is stopped rather than buffered for.
    this.writer = new WriteQueue(
      peer.stdin,
      {
        lines: BROKER_PEER_WRITE_QUEUE_MESSAGES,
        timeoutMs: BROKER_PEER_WRITE_STALL_MS,
        what: "MCP peer input",
      },
      () => this.stop(peer, PEER_STALLED),
    );
    // A command that cannot be started is reported by the guardian; fail the connect with it.
    await peer.childPid;
    void this.read(peer);
    void peer.exited.then(() => this.finish());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || !this.writer) throw new Error("MCP peer is closed");
    await this.writer.push(encodeFrame(message, BROKER_PEER_LINE_MAX_BYTES));
  }

  /** Ends the peer's input, gives it a moment to exit, then kills its group (GuardedProcess.stop). */
  async close(): Promise<void> {
    const peer = this.peer;
    if (!peer || this.closed) return;
    this.writer?.close();
    await peer.stop(BROKER_PEER_CLOSE_GRACE_MS);
    this.finish();
  }

  private async read(peer: GuardedProcess): Promise<void> {
    const splitter = new LineSplitter(BROKER_PEER_LINE_MAX_BYTES);
    try {
      for await (const chunk of peer.stdout) {
        for (const line of splitter.push(chunk)) {
          if (isBlankLine(line)) continue;
          const verdict = parseJsonRpcLine(line);
          if (!("message" in verdict)) {
            this.stop(peer, PEER_INVALID);
            return;
          }
          this.onmessage?.(verdict.message);
        }
      }
    } catch (error) {
      this.stop(peer, error instanceof FrameTooLargeError ? PEER_TOO_LARGE : "MCP peer output failed");
    }
  }

  /**
   * A peer whose output cannot be trusted is stopped at once, so calls waiting on it fail now rather
   * than at their deadline; `failure` tells the broker why the connection closed.
   */
  private stop(peer: GuardedProcess, reason: string): void {
    this.failure ??= reason;
    this.onerror?.(new Error(reason));
    void peer.stop(0);
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }
}
