// What a session's supervisor needs of the Python it runs cells on, whatever carries the frames: the
// local worker process (process.ts, frames over its pipes) today, a Jupyter kernel later (the frames over
// the kernel's own channels). The supervisor speaks frames (docs/worker-protocol.md) and nothing else.
import type { RunningCell } from "../parking/protocol.ts";
import type { ReadyFrame, WorkerFrame } from "./frames.ts";
import type { NativeStderr } from "./native-stderr.ts";
import type { Failure } from "./result.ts";

/** Why the frame channel closed; a worker is unusable after any of these. */
export type CloseReason = "exited" | "broken" | "killed";

/**
 * What a worker is started for: a session's persistent namespace, the same after a reset (a channel
 * that holds a namespace it did not start, such as a kernel attached to, must start it afresh), or one
 * fresh file run.
 */
export type WorkerPurpose = "session" | "reset" | "fresh";

/**
 * The run in flight when a worker was lost never reached its namespace: the loss came first and was seen
 * only during the run (a Jupyter kernel that died between cells, which its server notices seconds later).
 * "unsent": the run never left the server, so it can run on the next worker as if the loss had been seen
 * before it. "untouched": it was sent, and nothing shows the lost namespace took it; it is not sent again.
 */
export type LostBefore = "unsent" | "untouched";

export interface WorkerChannel {
  /** What the worker said when it came up (its Python, executable, pid). */
  readonly ready: ReadyFrame;
  /** Output written below Python (fd 2 of the worker's process), where the channel can see it. */
  readonly stderr: NativeStderr;
  /** Called for every frame after `ready`. */
  onFrame: (frame: WorkerFrame) => void;
  /** Resolves when the channel is closed and everything behind it is gone. */
  readonly closed: Promise<CloseReason>;
  readonly alive: boolean;
  /** Why the worker was lost, when the channel knows better than "crashed" (a kernel's death). */
  readonly loss?: Failure;
  /** Set when closed: the run in flight never reached the namespace that was lost. */
  readonly lostBefore?: LostBefore;
  /** Calls fn when the channel closes; returns the way to unhook it. */
  onClose(fn: () => void): () => void;
  /** Queues one frame; rejects if it does not fit or the worker is gone. */
  send(frame: unknown): Promise<void>;
  /** Queues a frame already encoded (with its newline). */
  sendEncoded(bytes: Uint8Array): Promise<void>;
  /** Stops what the worker started outside itself (detached process groups). */
  killJobs(): void;
  /** Interrupts the running cell (SIGINT, or the kernel's interrupt). */
  interrupt(): void;
  /** The worker's resident memory in bytes, where it can be measured. */
  residentBytes(): number | undefined;
  /** Ends it at once. */
  kill(reason?: CloseReason): Promise<void>;
  /** Asks it to leave, then makes sure it is gone. */
  stop(): Promise<void>;
}

/** What comes with a worker an earlier server kept (Supervisor.adopt): a parked worker, a kept kernel. */
export interface Handover {
  generation: number;
  /** The cell it was running when its server let go (its result may already be among its frames). */
  running?: RunningCell | null;
  /** Starts the frames flowing, once the supervisor listens (the kept ones first). */
  begin?: () => void;
  /** What its parked record said of its sandbox (docs/sandbox.md), for the adopter to serve it. */
  containment?: unknown;
  /** Calls fn once the worker is gone for good in this server's time (not when it is parked again). */
  whenGone?: (fn: () => void) => void;
}
