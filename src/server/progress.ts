// Live progress for a call that carries a progress token: a heartbeat while the cell is silent, and a
// faster but bounded pace while it prints. Each notification quotes the run's status line (elapsed
// seconds and newest output); `progress` counts notifications, so it only ever grows.
import { PROGRESS_HEARTBEAT_MS, PROGRESS_MIN_GAP_MS } from "../limits.ts";
import type { ActiveRun } from "../worker/run.ts";

export type SendProgress = (progress: number, message: string) => void;

export interface CallProgress {
  /** Hand to the run request: starts reporting once the run holds the slot. */
  onRun?: (run: ActiveRun) => void;
  /** Reports a wait that is not a run (a kernel starting): at once, then on every heartbeat, until stopped. */
  onWait?: (describe: () => string) => () => void;
  /** Ends reporting; called before the call's response is sent, so nothing follows it. */
  stop(): void;
}

/** Progress for one call: nothing at all without a token. A run's reporting also ends with the run. */
export function progressForCall(token: unknown, send: SendProgress): CallProgress {
  if (token === undefined || token === null) return { stop: () => {} };
  const stops: Array<() => void> = [];
  // Waits and runs of one call share the count, so `progress` only ever grows.
  let count = 0;
  return {
    onRun: (run) => {
      const stop = reportProgress(run, send);
      stops.push(stop);
      void run.done.finally(stop);
    },
    onWait: (describe) => {
      const started = performance.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const emit = () => {
        count++;
        send(count, `${describe()} (${Math.round((performance.now() - started) / 1000)} s)`);
        timer = setTimeout(emit, PROGRESS_HEARTBEAT_MS);
      };
      emit();
      const stop = () => clearTimeout(timer);
      stops.push(stop);
      return stop;
    },
    stop: () => {
      for (const stop of stops) stop();
    },
  };
}

/** Starts reporting on `run` at once; the returned function stops it for good (idempotent). */
export function reportProgress(run: ActiveRun, send: SendProgress): () => void {
  let count = 0;
  let lastAt = 0;
  let stopped = false;
  let heartbeat: ReturnType<typeof setTimeout> | undefined;
  let soon: ReturnType<typeof setTimeout> | undefined;

  const emit = () => {
    if (stopped) return;
    clearTimeout(heartbeat);
    clearTimeout(soon);
    soon = undefined;
    count++;
    lastAt = performance.now();
    send(count, run.statusMessage());
    heartbeat = setTimeout(emit, PROGRESS_HEARTBEAT_MS);
  };
  const onOutput = () => {
    if (stopped || soon) return;
    const wait = lastAt + PROGRESS_MIN_GAP_MS - performance.now();
    if (wait <= 0) emit();
    else soon = setTimeout(emit, wait);
  };

  run.outputListeners.add(onOutput);
  emit();
  return () => {
    stopped = true;
    clearTimeout(heartbeat);
    clearTimeout(soon);
    run.outputListeners.delete(onOutput);
  };
}
