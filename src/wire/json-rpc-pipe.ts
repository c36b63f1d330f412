// A JSON-RPC conversation over a pair of pipes (our stdin/stdout with the MCP client, or a stdio MCP
// peer's stdout/stdin), with memory bounded in both directions:
// - what we owe the other side is written through a WriteQueue (a few lines, a stall deadline), and the
//   bytes of every message not yet handed to the pipe are counted;
// - while that backlog is over its bound, the other side's requests wait here instead of being served
//   (each served request adds an answer to the backlog), and once enough of them wait we stop reading
//   its input at all, so the kernel's pipe buffer pushes back on the writer.
// Responses and cancellations are never held back: they add nothing to the backlog, and a cancellation
// of a request still waiting here simply removes it (it never started, so there is nothing to answer).
// A line the judge refuses with an answer of its own (a bad line, a revision we do not serve) takes its
// turn like a request: its answer waits here while the backlog is full, and counts toward stopping reads.
import type { FileSink } from "bun";
import { PIPE_MESSAGE_OVERHEAD_BYTES } from "../limits.ts";
import type { JSONRPCMessage } from "./jsonrpc.ts";
import { SkippingLineSplitter, type SplitLine } from "./lines.ts";
import { WRITTEN, WriteQueue } from "./write-queue.ts";

export interface PipeLimits {
  /** One inbound line, newline included; longer ones reach `judge` as OVERSIZED. */
  lineMaxBytes: number;
  /** Bytes of outbound messages not yet taken by the pipe, above which inbound requests wait. */
  backlogMaxBytes: number;
  /** Bytes of inbound requests waiting, above which we stop reading the input. */
  waitingMaxBytes: number;
  /** Lines the write queue accepts at once, and how long the reader may stall it. */
  writeQueueLines: number;
  stallMs: number;
  /** Names the other side's input in errors ("MCP client output", ...). */
  what: string;
}

export interface PipeHandlers {
  /**
   * What an inbound line is: a message to handle, the encoded answer that refuses it (written in its
   * turn, within the output bound), or undefined to drop it unanswered.
   */
  judge(line: SplitLine): JSONRPCMessage | Uint8Array | undefined;
  deliver(message: JSONRPCMessage): void;
  /** The other side read nothing for `stallMs`; it is treated as gone. */
  stalled(): void;
  /** The input ended (EOF or a read error). */
  ended(error?: unknown): void;
}

// Requests served in one turn of the event loop before the backlog is looked at again: answers made
// without waiting for I/O are queued by then, so a burst of requests cannot outrun the bound.
const REQUESTS_PER_TURN = 16;

/** A request to deliver, or the answer refusing a line, to write. */
interface Waiting {
  message?: JSONRPCMessage;
  answer?: Uint8Array;
  bytes: number;
}

export class JsonRpcPipe {
  private readonly writer: WriteQueue;
  private backlog = 0;
  private readonly waiting: Waiting[] = [];
  private waitingBytes = 0;
  private scheduled = false;
  private servedThisTurn = 0;
  private resumeReading: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly input: ReadableStream<Uint8Array>,
    output: FileSink,
    private readonly limits: PipeLimits,
    private readonly handlers: PipeHandlers,
  ) {
    this.writer = new WriteQueue(
      output,
      { lines: limits.writeQueueLines, timeoutMs: limits.stallMs, what: limits.what },
      () => handlers.stalled(),
    );
  }

  /** Starts reading; resolves when the input ends. */
  async read(): Promise<void> {
    const splitter = new SkippingLineSplitter(this.limits.lineMaxBytes);
    let failure: unknown;
    try {
      for await (const chunk of this.input) {
        for (const line of splitter.push(chunk)) {
          if (this.stopped) break;
          const verdict = this.handlers.judge(line);
          if (verdict instanceof Uint8Array) this.refuse(verdict);
          else if (verdict) this.admit(verdict, typeof line === "symbol" ? 0 : line.length);
        }
        if (this.stopped) break;
        if (this.waitingBytes > this.limits.waitingMaxBytes) {
          await new Promise<void>((resolve) => {
            this.resumeReading = resolve;
          });
        }
      }
    } catch (error) {
      failure = error;
    }
    if (!this.stopped) this.handlers.ended(failure);
  }

  /** Writes one encoded message (newline included). */
  send(bytes: Uint8Array): Promise<void> {
    const cost = bytes.length + PIPE_MESSAGE_OVERHEAD_BYTES;
    this.backlog += cost;
    let written: Promise<void>;
    try {
      written = this.writer.push(bytes);
    } catch (error) {
      this.backlog -= cost;
      return Promise.reject(error);
    }
    if (written === WRITTEN) {
      this.backlog -= cost;
      return written;
    }
    return written.finally(() => {
      this.backlog -= cost;
      this.schedule();
    });
  }

  /** Ends the output once everything queued is written; inbound requests still waiting are dropped. */
  close(): void {
    this.stopped = true;
    this.waiting.length = 0;
    this.waitingBytes = 0;
    this.resumeReading?.();
    this.writer.close();
  }

  private admit(message: JSONRPCMessage, bytes: number): void {
    const isRequest = "method" in message && "id" in message;
    if (!isRequest) {
      if ("method" in message && message.method === "notifications/cancelled") {
        const target = (message.params as { requestId?: unknown } | undefined)?.requestId;
        // Its request is either still waiting (then it never starts) or already being served: then
        // the cancellation goes at once, past the requests that wait.
        if (!this.unqueue(target)) this.handlers.deliver(message);
        return;
      }
      // Responses and notifications add nothing to the backlog; they keep their order unless requests
      // wait before them (a notification may refer to a request it follows, e.g. `initialized`).
      if (this.waiting.length === 0 || !("method" in message)) {
        this.handlers.deliver(message);
        return;
      }
    }
    if (this.waiting.length === 0 && this.mayServe()) {
      this.served();
      this.handlers.deliver(message);
      return;
    }
    this.waiting.push({ message, bytes });
    this.waitingBytes += bytes;
    this.schedule();
  }

  /** Writes a refusal now if a request could be served now, else queues it behind the waiting ones. */
  private refuse(answer: Uint8Array): void {
    if (this.waiting.length === 0 && this.mayServe()) {
      this.served();
      this.answer(answer);
      return;
    }
    const bytes = answer.length + PIPE_MESSAGE_OVERHEAD_BYTES;
    this.waiting.push({ answer, bytes });
    this.waitingBytes += bytes;
    this.schedule();
  }

  private answer(bytes: Uint8Array): void {
    // A failed write has already told the owner (a stall) or happens after close: nothing to add.
    this.send(bytes).catch(() => {});
  }

  /** Removes a request that has not been delivered yet; true if it was waiting. */
  private unqueue(id: unknown): boolean {
    const index = this.waiting.findIndex(
      ({ message }) => message !== undefined && "id" in message && message.id === id && "method" in message,
    );
    if (index === -1) return false;
    this.waitingBytes -= this.waiting[index]?.bytes ?? 0;
    this.waiting.splice(index, 1);
    return true;
  }

  /** Whether one more request may be served now: the backlog has room and this turn its share left. */
  private mayServe(): boolean {
    return this.backlog <= this.limits.backlogMaxBytes && this.servedThisTurn < REQUESTS_PER_TURN;
  }

  /** Counts a request served in this turn; the count starts over in the next one. */
  private served(): void {
    if (this.servedThisTurn++ > 0) return;
    setImmediate(() => {
      this.servedThisTurn = 0;
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.waiting.length === 0 || this.stopped) return;
    if (this.backlog > this.limits.backlogMaxBytes) return; // a finishing write calls schedule again
    this.scheduled = true;
    setImmediate(() => this.serveWaiting());
  }

  private serveWaiting(): void {
    this.scheduled = false;
    while (this.waiting.length > 0 && !this.stopped) {
      const { message, answer, bytes } = this.waiting[0] as Waiting;
      const takesTurn = message === undefined || ("id" in message && "method" in message);
      if (takesTurn && !this.mayServe()) break;
      this.waiting.shift();
      this.waitingBytes -= bytes;
      if (takesTurn) this.served();
      if (message) this.handlers.deliver(message);
      else this.answer(answer as Uint8Array);
    }
    if (this.waitingBytes <= this.limits.waitingMaxBytes && this.resumeReading) {
      const resume = this.resumeReading;
      this.resumeReading = undefined;
      resume();
    }
    this.schedule();
  }
}
