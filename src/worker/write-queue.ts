// The one writer of a worker's stdin. It holds a few frames at most; a frame it accepted is handed to
// the pipe whole even if the caller gives up waiting, so the next reader never sees half a line. A
// write that cannot complete in time means the worker is stuck, and the owner is told to kill it.
import type { FileSink } from "bun";
import { WRITER_QUEUE_FRAMES } from "../limits.ts";

export class WriteQueue {
  private queued = 0;
  private tail: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly sink: FileSink,
    private readonly timeoutMs: number,
    private readonly onStall: () => void,
  ) {}

  push(bytes: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(new Error("worker input is closed"));
    if (this.queued >= WRITER_QUEUE_FRAMES) return Promise.reject(new Error("worker input queue is full"));
    this.queued++;
    const done = this.tail.then(() => this.write(bytes)).finally(() => this.queued--);
    this.tail = done.catch(() => {});
    return done;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    void this.tail.then(() => {
      try {
        this.sink.end();
      } catch {}
    });
  }

  private async write(bytes: Uint8Array): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stalled = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.onStall();
        reject(new Error("worker input write timed out"));
      }, this.timeoutMs);
    });
    try {
      this.sink.write(bytes);
      await Promise.race([this.sink.flush(), stalled]);
    } finally {
      clearTimeout(timer);
    }
  }
}
