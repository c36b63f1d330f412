// A counting semaphore whose waiters give up at a deadline or when their signal aborts.
import { ReplError } from "../errors.ts";

export class Semaphore {
  private waiting: (() => void)[] = [];

  constructor(private free: number) {}

  async acquire(deadline: number, signal?: AbortSignal): Promise<() => void> {
    if (this.free > 0) {
      this.free--;
      return this.releaser();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve(this.releaser());
      };
      const giveUp = (error: ReplError) => {
        // The timer too: an abort must not leave it running until the deadline.
        clearTimeout(timer);
        this.waiting = this.waiting.filter((waiter) => waiter !== grant);
        signal?.removeEventListener("abort", onAbort);
        reject(error);
      };
      const onAbort = () => giveUp(new ReplError("CANCELLED", "MCP call cancelled while queued"));
      const timer = setTimeout(
        () => giveUp(new ReplError("DEADLINE_EXCEEDED", "MCP request budget exceeded while queued")),
        Math.max(0, deadline - Date.now()),
      );
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}
