// The one writer of a line-based pipe toward another process (a worker's stdin, a stdio MCP peer's stdin,
// our own stdout toward the client). It holds a few lines at most; a caller finding it full waits for
// room, so a reader that stops reading cannot make us buffer without limit. A line it accepted is
// handed to the pipe whole even if the caller gives up waiting, so the reader never sees half a line.
// Enqueueing plus writing has one deadline: a reader that stays stalled past it is treated as gone,
// and the owner is told through `onStall`.
import type { FileSink } from "bun";
import { withTimeout } from "../timeout.ts";

export interface WriteQueueOptions {
  /** Lines accepted at once (queued or being written). */
  lines: number;
  /** Deadline for enqueueing plus writing one line. */
  timeoutMs: number;
  /** Names the reader in error messages ("worker input", ...). */
  what: string;
}

/** What push() returns when the pipe took the line at once: callers may skip waiting on it. */
export const WRITTEN = Promise.resolve();

export class WriteQueue {
  private queued = 0;
  private tail: Promise<void> = Promise.resolve();
  private closed = false;
  private roomWaiters: (() => void)[] = [];

  constructor(
    private readonly sink: FileSink,
    private readonly options: WriteQueueOptions,
    private readonly onStall: () => void,
  ) {}

  push(bytes: Uint8Array): Promise<void> {
    // The common case, once per message: nothing queued and the pipe takes the line at once. It costs
    // no promise chain and no timer; anything else goes through the queue below.
    if (this.queued === 0 && !this.closed) {
      let flushed: number | Promise<number>;
      try {
        this.sink.write(bytes);
        flushed = this.sink.flush();
      } catch (error) {
        return Promise.reject(error);
      }
      if (typeof flushed === "number") return WRITTEN;
      return this.track(this.settle(flushed, Date.now() + this.options.timeoutMs));
    }
    return this.enqueue(bytes);
  }

  private async enqueue(bytes: Uint8Array): Promise<void> {
    const { what, timeoutMs } = this.options;
    const deadline = Date.now() + timeoutMs;
    while (this.queued >= this.options.lines) {
      if (this.closed) throw new Error(`${what} is closed`);
      const left = deadline - Date.now();
      if (left <= 0 || !(await this.room(left))) {
        this.onStall();
        throw new Error(`${what} stayed full for ${timeoutMs / 1000} s`);
      }
    }
    if (this.closed) throw new Error(`${what} is closed`);
    return this.track(this.tail.then(() => this.write(bytes, deadline)));
  }

  /** Counts a write in flight until it settles; later lines queue behind it. */
  private track(write: Promise<void>): Promise<void> {
    this.queued++;
    const done = write.finally(() => {
      this.queued--;
      this.roomWaiters.shift()?.();
    });
    this.tail = done.catch(() => {});
    return done;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const wake of this.roomWaiters.splice(0)) wake();
    void this.tail.then(() => {
      try {
        this.sink.end();
      } catch {}
    });
  }

  /** Resolves true when a slot frees up, false when `ms` pass first. */
  private room(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.roomWaiters = this.roomWaiters.filter((waiter) => waiter !== wake);
        resolve(false);
      }, ms);
      this.roomWaiters.push(wake);
    });
  }

  private async write(bytes: Uint8Array, deadline: number): Promise<void> {
    this.sink.write(bytes);
    const flushed = this.sink.flush();
    // Usually the pipe takes the frame at once: then there is nothing to time out, and no timer to arm.
    if (typeof flushed === "number") return;
    await this.settle(flushed, deadline);
  }

  /** Waits for a flush the pipe could not take at once, up to the line's deadline. */
  private async settle(flushed: Promise<number>, deadline: number): Promise<void> {
    await withTimeout(flushed, deadline - Date.now(), () => {
      this.onStall();
      throw new Error(`${this.options.what} write stalled for ${this.options.timeoutMs / 1000} s`);
    });
  }
}
