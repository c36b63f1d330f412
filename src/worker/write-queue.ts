// The one writer of a worker's stdin. It holds a few frames at most; a caller finding it full waits
// for room. A frame it accepted is handed to the pipe whole even if the caller gives up waiting, so
// the next reader never sees half a line. Enqueueing plus writing has one deadline: a worker that does
// not read its input in time is stuck, and the owner is told to kill it.
import type { FileSink } from "bun";
import { WRITER_QUEUE_FRAMES } from "../limits.ts";
import { withTimeout } from "../timeout.ts";

export class WriteQueue {
  private queued = 0;
  private tail: Promise<void> = Promise.resolve();
  private closed = false;
  private roomWaiters: (() => void)[] = [];

  constructor(
    private readonly sink: FileSink,
    private readonly timeoutMs: number,
    private readonly onStall: () => void,
  ) {}

  async push(bytes: Uint8Array): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    while (this.queued >= WRITER_QUEUE_FRAMES) {
      if (this.closed) throw new Error("worker input is closed");
      const left = deadline - Date.now();
      if (left <= 0 || !(await this.room(left))) {
        this.onStall();
        throw new Error("worker input queue stayed full");
      }
    }
    if (this.closed) throw new Error("worker input is closed");
    this.queued++;
    const done = this.tail
      .then(() => this.write(bytes, deadline))
      .finally(() => {
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
    await withTimeout(flushed, deadline - Date.now(), () => {
      this.onStall();
      throw new Error("worker input write timed out");
    });
  }
}
