// A stdio MCP peer started through a guardian: the peer lives in its own process group, dies with the
// server, and can never send us a line over 1 MiB. What we owe it is bounded like what we owe our own
// client (wire/json-rpc-pipe.ts): a peer that stops reading its input while it keeps asking us things
// stops being answered, and after a stall deadline it is stopped.
//
// The process is one thing and the SDK clients talking to it another: connecting may take two clients
// in turn on the same pipes (a legacy `initialize` first, then the 2026-07-28 era if the peer refuses it,
// see connections.ts), so each client gets a `channel()`, and closing a channel never ends the process.
// Only `close()` does. Answers to the tools/call requests the broker writes here itself (direct-calls.ts)
// are taken off before the client sees the stream.
import type { Transport } from "@modelcontextprotocol/client";
import { childEnv } from "../guardian/env.ts";
import { GuardedProcess } from "../guardian/spawn.ts";
import {
  BROKER_PEER_CLOSE_GRACE_MS,
  BROKER_PEER_INPUT_BACKLOG_MAX_BYTES,
  BROKER_PEER_LINE_MAX_BYTES,
  BROKER_PEER_WAITING_MAX_BYTES,
  BROKER_PEER_WRITE_QUEUE_MESSAGES,
  BROKER_PEER_WRITE_STALL_MS,
} from "../limits.ts";
import { sizeText } from "../text/size.ts";
import { JsonRpcPipe } from "../wire/json-rpc-pipe.ts";
import { isBlankLine, type JSONRPCMessage, parseJsonRpcLine } from "../wire/jsonrpc.ts";
import { encodeFrame, OVERSIZED } from "../wire/lines.ts";
import type { StdioEntry } from "./config.ts";
import { DirectCalls } from "./direct-calls.ts";

const PEER_INVALID = "MCP peer sent invalid data (a line that is not JSON-RPC) and was stopped";
const PEER_TOO_LARGE = `MCP peer frame exceeds ${sizeText(BROKER_PEER_LINE_MAX_BYTES)}; the peer was stopped`;
const PEER_STALLED = `MCP peer read none of its input for ${BROKER_PEER_WRITE_STALL_MS / 1000} s and was stopped`;

export class StdioPeer {
  /** Why the peer was stopped, when it misbehaved. */
  failure: string | undefined;
  /** tools/call requests sent on these pipes without the SDK client (used once a legacy client connected). */
  readonly calls = new DirectCalls((message) => this.send(message));
  private process: GuardedProcess | undefined;
  private pipe: JsonRpcPipe | undefined;
  private current: PeerChannel | undefined;
  private closed = false;

  constructor(private readonly entry: StdioEntry) {}

  /** Spawns the peer; fails if its command cannot be started. */
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
    this.process = peer;
    this.pipe = new JsonRpcPipe(
      peer.stdout,
      peer.stdin,
      {
        lineMaxBytes: BROKER_PEER_LINE_MAX_BYTES,
        backlogMaxBytes: BROKER_PEER_INPUT_BACKLOG_MAX_BYTES,
        waitingMaxBytes: BROKER_PEER_WAITING_MAX_BYTES,
        writeQueueLines: BROKER_PEER_WRITE_QUEUE_MESSAGES,
        stallMs: BROKER_PEER_WRITE_STALL_MS,
        what: "MCP peer input",
      },
      {
        judge: (line) => {
          if (line === OVERSIZED) return this.stop(PEER_TOO_LARGE);
          if (isBlankLine(line)) return undefined;
          const verdict = parseJsonRpcLine(line);
          return "message" in verdict ? verdict.message : this.stop(PEER_INVALID);
        },
        deliver: (message) => {
          if (!this.calls.take(message)) this.current?.onmessage?.(message);
        },
        stalled: () => this.stop(PEER_STALLED),
        ended: (error) => {
          if (error) this.stop("MCP peer output failed");
        },
      },
    );
    // A command that cannot be started is reported by the guardian; fail the connect with it.
    await peer.childPid;
    void this.pipe.read();
    void peer.exited.then(() => this.finish());
  }

  /** A transport for one SDK client over this peer's pipes; it replaces the previous one. */
  channel(): Transport {
    const channel = new PeerChannel(this);
    this.current = channel;
    return channel;
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || !this.pipe) throw new Error("MCP peer is closed");
    await this.pipe.send(encodeFrame(message, BROKER_PEER_LINE_MAX_BYTES));
  }

  /** Ends the peer's input, gives it a moment to exit, then kills its group (GuardedProcess.stop). */
  async close(): Promise<void> {
    const peer = this.process;
    if (!peer || this.closed) return;
    this.pipe?.close();
    await peer.stop(BROKER_PEER_CLOSE_GRACE_MS);
    this.finish();
  }

  /**
   * A peer whose output cannot be trusted is stopped at once, so calls waiting on it fail now rather
   * than at their deadline; `failure` tells the broker why the connection closed.
   */
  private stop(reason: string): undefined {
    this.failure ??= reason;
    this.current?.onerror?.(new Error(reason));
    void this.process?.stop(0);
    return undefined;
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.calls.close(new Error(this.failure ?? "MCP peer exited"));
    this.current?.end();
  }

  get isClosed(): boolean {
    return this.closed;
  }
}

/** One SDK client's view of a peer: messages in and out; closing it leaves the process to its owner. */
class PeerChannel implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private ended = false;

  constructor(private readonly peer: StdioPeer) {}

  /** Tells the client once that its channel is gone (closed by it, or the process ended). */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onclose?.();
  }

  async start(): Promise<void> {
    if (this.peer.isClosed) throw new Error("MCP peer is closed");
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.peer.send(message);
  }

  async close(): Promise<void> {
    this.end();
  }
}
