// How a kernel's WebSocket comes back after it dropped (docs/kernels.md, "Faults"). The Jupyter services
// try once at once and then, after an attempt that fails before it opens, ask the server about the kernel
// and wait 10 to 30 s before the next: longer than a run waits for its connection (KERNEL_RECONNECT_WAIT_MS),
// so a network back after 5 s was never seen and the run's outcome became unknown for nothing. Here the
// attempts keep coming, with a short backoff (250 ms doubling to 1 s), each one dropped for a fresh one if
// it hangs, for as long as someone waits: the wait after the drop itself, and that of any run that comes
// while the connection is down. Meanwhile, after each failed attempt, the server is asked whether the
// kernel still exists: one that is gone (deleted, its server lost it) is reported as such, not tried for.
import {
  KERNEL_RECONNECT_ATTEMPT_MS,
  KERNEL_RECONNECT_FIRST_DELAY_MS,
  KERNEL_RECONNECT_MAX_DELAY_MS,
  KERNEL_RECONNECT_WAIT_MS,
} from "../limits.ts";

/**
 * The connection as a kernel's life sees it: "connecting" while attempts are made, "disconnected" once
 * they stopped for lack of anyone waiting (a run's `want` starts them again), "gone" once the server said
 * the kernel no longer exists.
 */
export type LinkState = "connected" | "connecting" | "disconnected" | "gone";

export interface ReconnectTarget {
  /** Starts a fresh attempt to open the WebSocket now, dropping any attempt under way. */
  reopen(): void;
  /** Whether the kernel still exists (and is not dead) on its server; rejects when the server cannot say. */
  exists(): Promise<boolean>;
}

export class Reconnector {
  private current: LinkState;
  private readonly listeners = new Set<(state: LinkState) => void>();
  /** Attempts are made until then (performance.now() milliseconds). */
  private tryUntil = 0;
  /** The pause before the next attempt. */
  private delay = 0;
  private attemptTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private asking = false;
  private stopped = false;

  constructor(
    private readonly target: ReconnectTarget,
    connected: boolean,
  ) {
    this.current = connected ? "connected" : "connecting";
    // The first attempt may take as long as the server needs (it answers a new socket once the kernel
    // answered it, which a kernel just started does only when it is up); the ones after a failure are
    // those of a connection that dropped.
    this.tryUntil = performance.now() + KERNEL_RECONNECT_WAIT_MS;
    this.delay = KERNEL_RECONNECT_FIRST_DELAY_MS;
  }

  get state(): LinkState {
    return this.current;
  }

  /** Calls fn on every change of state; returns the way to stop. */
  onState(fn: (state: LinkState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The WebSocket opened. */
  connected(): void {
    if (this.stopped || this.current === "gone") return;
    this.clearTimers();
    this.set("connected");
  }

  /** An open WebSocket closed; the services' own first attempt, made at once, is under way. */
  dropped(): void {
    if (this.stopped || this.current === "gone") return;
    this.tryUntil = Math.max(this.tryUntil, performance.now() + KERNEL_RECONNECT_WAIT_MS);
    this.delay = KERNEL_RECONNECT_FIRST_DELAY_MS;
    this.set("connecting");
    this.armAttempt();
  }

  /** The attempt under way ended before the WebSocket opened (refused, reset, unreachable, 404). */
  attemptFailed(): void {
    if (this.stopped || this.current === "connected" || this.current === "gone") return;
    this.askWhetherGone();
    this.retry();
  }

  /**
   * The services stopped trying (a close that said the server is going away); from a live connection
   * that is a drop like any other.
   */
  gaveUp(): void {
    if (this.stopped || this.current === "gone") return;
    if (this.current === "connected") this.dropped();
    this.retry();
  }

  /** A run waits for the connection: attempts keep coming for the whole wait, starting now if they had stopped. */
  want(): void {
    if (this.stopped || this.current === "connected" || this.current === "gone") return;
    this.tryUntil = Math.max(this.tryUntil, performance.now() + KERNEL_RECONNECT_WAIT_MS);
    if (this.current === "disconnected") {
      this.delay = KERNEL_RECONNECT_FIRST_DELAY_MS;
      this.set("connecting");
      this.attempt();
    }
  }

  /** No more attempts (the connection is being closed). */
  stop(): void {
    this.stopped = true;
    this.clearTimers();
  }

  private attempt(): void {
    if (this.stopped || this.current === "connected" || this.current === "gone") return;
    this.armAttempt();
    this.target.reopen();
  }

  /** An attempt that neither opens nor fails in time (packets dropped on the way) makes way for the next. */
  private armAttempt(): void {
    clearTimeout(this.attemptTimer);
    this.attemptTimer = setTimeout(() => this.retry(), KERNEL_RECONNECT_ATTEMPT_MS);
  }

  private retry(): void {
    this.clearTimers();
    if (performance.now() >= this.tryUntil) {
      this.set("disconnected");
      return;
    }
    const delay = this.delay;
    this.delay = Math.min(delay * 2 || KERNEL_RECONNECT_FIRST_DELAY_MS, KERNEL_RECONNECT_MAX_DELAY_MS);
    this.retryTimer = setTimeout(() => this.attempt(), delay);
  }

  /** One question at a time; a server that cannot be asked (down, unreachable) leaves the attempts going. */
  private askWhetherGone(): void {
    if (this.asking) return;
    this.asking = true;
    this.target
      .exists()
      .then(
        (exists) => {
          if (exists || this.stopped || this.current === "connected") return;
          this.clearTimers();
          this.set("gone");
        },
        () => {},
      )
      .finally(() => {
        this.asking = false;
      });
  }

  private clearTimers(): void {
    clearTimeout(this.attemptTimer);
    clearTimeout(this.retryTimer);
    this.attemptTimer = undefined;
    this.retryTimer = undefined;
  }

  private set(state: LinkState): void {
    if (this.current === state) return;
    this.current = state;
    for (const listener of this.listeners) listener(state);
  }
}
