// One run's exchange with the engine inside a kernel (kernel-worker.ts): what is known of it (sent yet,
// seen by the engine, which process answered the question sent ahead of it), the frames waiting for the
// engine's input request, and the results a kernel life gives a run itself when the engine cannot.
import { KERNEL_RECONNECT_WAIT_MS } from "../limits.ts";
import type { WorkerResult } from "../worker/frames.ts";

/** One run's exchange with the engine: frames waiting for its input request, and who waits for them. */
export interface RunExchange {
  id: string;
  /** The execute frame, as sent to the engine. */
  text: string;
  queue: unknown[];
  wake: (() => void) | undefined;
  /** The request ended (or was dropped). */
  done: boolean;
  /** Its result frame came. */
  resulted: boolean;
  /** An interrupt was asked for while it ran. */
  interrupted: boolean;
  /** Handed to the connection (a run waits for a connection that is down before it is sent). */
  sent: boolean;
  /** The connection's drop count when it was sent. */
  epoch: number;
  /** Which kernel process answered the kernel_info request sent just ahead of it (its messaging session). */
  answeredBy: string | undefined;
  /** Something of it came back (a frame, an input request, the request's end): the engine took it. */
  seen: boolean;
}

export function newRun(frame: { id: string }): RunExchange {
  return {
    id: frame.id,
    text: JSON.stringify(frame),
    queue: [],
    wake: undefined,
    done: false,
    resulted: false,
    interrupted: false,
    sent: false,
    epoch: 0,
    answeredBy: undefined,
    seen: false,
  };
}

/** An interrupt stopped the run before the engine took it: nothing of the cell ran. */
export function interruptedBeforeStart(runId: string): WorkerResult {
  return {
    success: false,
    stdout: "",
    stderr: "",
    return_value: null,
    error: `Execution interrupted (${runId}) before it started; namespace preserved`,
    truncated: { stdout: false, stderr: false, return: false },
    state: "preserved",
    interrupted: true,
    stderr_barrier: false,
  };
}

/**
 * The run waited the whole while for its connection (`where` is the kernel's label): sent, its outcome is
 * unknown; not sent, nothing ran. Either way the kernel and its namespace stay.
 */
export function connectionLost(run: RunExchange, where: string): WorkerResult {
  const seconds = KERNEL_RECONNECT_WAIT_MS / 1000;
  const error = run.sent
    ? `The connection to the kernel (${where}) dropped while the run was in flight and did not come ` +
      `back within ${seconds} s: whether the run finished, and what it did, is unknown (it may still be ` +
      "running there). Nothing was re-executed. The kernel and its variables are kept: the next run goes " +
      "to the same kernel once the connection is back"
    : `The connection to the kernel (${where}) is down and did not come back within ${seconds} s; the ` +
      "run was not sent (nothing ran). The kernel and its variables are kept: run it again once the " +
      "kernel's server can be reached";
  return {
    success: false,
    stdout: "",
    stderr: "",
    return_value: null,
    error,
    truncated: { stdout: false, stderr: false, return: false },
    state: "preserved",
    error_code: "KERNEL_CONNECTION_LOST",
    stderr_barrier: false,
  };
}
