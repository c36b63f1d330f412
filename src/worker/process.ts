// One running Python worker: started through a guardian, spoken to in frames over its stdin/stdout,
// with its fd 2 drained on the side. It knows nothing about runs or sessions; the supervisor does.
import { describe, ReplError } from "../errors.ts";
import { signalGroup } from "../guardian/kill.ts";
import type { KeepSpec, SpawnSpec } from "../guardian/protocol.ts";
import { GuardedProcess } from "../guardian/spawn.ts";
import {
  FRAME_MAX_BYTES,
  FRAME_WRITE_TIMEOUT_MS,
  STDERR_DRAIN_BARRIER_MS,
  WORKER_EXIT_WAIT_MS,
  WORKER_READY_TIMEOUT_MS,
  WRITER_QUEUE_FRAMES,
} from "../limits.ts";
import { log } from "../log.ts";
import { sizeText } from "../text/size.ts";
import { waitAtMost, withTimeout } from "../timeout.ts";
import { decodeLine, encodeFrame, FrameTooLargeError, LineSplitter } from "../wire/lines.ts";
import { WriteQueue } from "../wire/write-queue.ts";
import type { CloseReason, WorkerChannel } from "./channel.ts";
import { parseWorkerFrame, type ReadyFrame, type WorkerFrame } from "./frames.ts";
import { hostPidOf } from "./namespace-pid.ts";
import { NativeStderr } from "./native-stderr.ts";
import type { Failure } from "./result.ts";
import { residentBytes } from "./rss.ts";
import { BOOTSTRAP, workerSourcePath } from "./source.ts";

export interface WorkerLaunch {
  python: string;
  cwd: string;
  env: Record<string, string>;
  /** A reason no worker can start (e.g. no interpreter found). */
  problem?: string;
  /**
   * Set for a contained session (docs/sandbox.md): turns the interpreter's command into the sandboxed one.
   * It may refuse (a ReplError), and then no worker starts: a contained session never runs uncontained.
   */
  contain?: (spec: SpawnSpec) => Promise<Contained>;
  /**
   * Set for a kept session (docs/sessions.md, "Keeping a session"): its worker starts under a keeping
   * guardian (worker/kept.ts) that parks it when this server goes. Fresh file runs are never kept.
   */
  keep?: KeepLaunch;
}

/** What a kept worker's guardian is told besides the command (guardian/protocol.ts KeepSpec, less what the supervisor adds). */
export type KeepLaunch = Omit<KeepSpec, "generation" | "holder_pid">;

/** A contained worker's command, and what to give back once that worker is gone. */
export interface Contained {
  spec: SpawnSpec;
  /** What a kept worker's parked record carries so that the next server serves it contained (JSON). */
  record: unknown;
  /** Called once, when the worker is gone for good in this server's time (never when it is parked). */
  release(): void;
  /** Calls `stop` with why if the sandbox stops holding for this worker (a protected file replaced). */
  onBreach(stop: (why: string) => void): void;
}

/**
 * The command that runs worker.py for `launch`, turned into its contained form when the session is
 * contained: the plain and the kept paths both start exactly this.
 */
export async function workerSpec(launch: WorkerLaunch): Promise<{ spec: SpawnSpec; contained?: Contained }> {
  if (launch.problem) throw new ReplError("WORKER_START_FAILED", launch.problem);
  const plain: SpawnSpec = {
    program: launch.python,
    args: ["-u", "-c", BOOTSTRAP, workerSourcePath()],
    env: launch.env,
    cwd: launch.cwd,
  };
  if (!launch.contain) return { spec: plain };
  const contained = await launch.contain(plain);
  return { spec: contained.spec, contained };
}

/** The local worker: worker.py in a process of its own under a guardian, frames over its pipes. */
export class WorkerProcess implements WorkerChannel {
  readonly stderr = new NativeStderr();
  /** Called for every frame after `ready`. */
  onFrame: (frame: WorkerFrame) => void = () => {};
  /** Resolves when the frame channel is closed and the guardian's group is gone. */
  readonly closed: Promise<CloseReason>;
  ready!: ReadyFrame;
  private closeReason: CloseReason | undefined;
  private readonly writer: WriteQueue;
  private readonly guarded: GuardedProcess;
  /** Process groups of detached children the worker reported, killed on cancel and with the worker. */
  private readonly jobs = new Set<number>();
  /**
   * A contained worker lives in pid namespaces of its own: only it may be sent SIGINT (its sandbox's
   * relays and shells share its group), and the groups it reports are not this host's (it stops them
   * itself on cancel; they all end with its sandbox).
   */
  private contained = false;
  /** Why the worker was lost, when the server stopped it for a reason of its own (the sandbox's). */
  loss: Failure | undefined;
  private readySignal!: { resolve: (frame: ReadyFrame) => void; reject: (error: Error) => void };
  /** Called once when the channel closes; a run hooks in here and unhooks when it ends. */
  private readonly closeListeners = new Set<() => void>();
  private channelClosed = false;

  private constructor(spec: SpawnSpec) {
    this.guarded = new GuardedProcess(spec, { stderr: "pipe" });
    const stderr = this.guarded.stderr;
    const stderrDone = stderr ? this.stderr.drain(stderr) : Promise.resolve();
    const queue = { lines: WRITER_QUEUE_FRAMES, timeoutMs: FRAME_WRITE_TIMEOUT_MS, what: "worker input" };
    this.writer = new WriteQueue(this.guarded.stdin, queue, () => {
      log.warn("worker stdin write stalled; killing the worker");
      this.kill("broken");
    });
    const frames = this.readFrames();
    const guardianGone = this.guarded.exited;
    this.closed = (async () => {
      await frames;
      await guardianGone;
      // A grandchild that escaped the group (setsid, a daemon) may hold the stderr pipe open for
      // ever: what it writes after the worker is gone is no longer ours to wait for.
      await waitAtMost(stderrDone, STDERR_DRAIN_BARRIER_MS);
      this.stderr.stop();
      return this.closeReason ?? "exited";
    })();
    void this.closed.then(() => {
      this.channelClosed = true;
      for (const listener of this.closeListeners) listener();
      this.closeListeners.clear();
    });
  }

  static async start(launch: WorkerLaunch): Promise<WorkerProcess> {
    const { spec, contained } = await workerSpec(launch);
    let worker: WorkerProcess;
    try {
      worker = new WorkerProcess(spec);
    } catch (error) {
      contained?.release();
      throw error;
    }
    if (contained) {
      worker.contained = true;
      void worker.closed.then(() => contained.release());
      contained.onBreach((why) => worker.lose({ code: "WORKER_CRASHED", message: why }));
    }
    const ready = new Promise<ReadyFrame>((resolve, reject) => {
      worker.readySignal = { resolve, reject };
    });
    const exited = worker.closed.then((): never => {
      throw new ReplError("WORKER_START_FAILED", "Python worker exited during startup");
    });
    // The guardian could not start the interpreter (or could not be told to): its reason is clearer.
    const notSpawned = worker.guarded.childPid.then(
      () => new Promise<never>(() => {}),
      (error: Error): never => {
        throw new ReplError("WORKER_START_FAILED", error.message);
      },
    );
    try {
      worker.ready = await withTimeout(
        Promise.race([ready, exited, notSpawned]),
        WORKER_READY_TIMEOUT_MS,
        () => {
          throw new ReplError("WORKER_START_FAILED", "Python worker startup timed out");
        },
      );
      if (worker.contained) {
        const pid = hostPidOf(await worker.guarded.childPid, worker.ready.pid);
        if (pid === undefined)
          throw new ReplError("WORKER_START_FAILED", "Cannot find the contained worker's process");
        worker.ready = { ...worker.ready, pid };
      }
      return worker;
    } catch (error) {
      await worker.kill("killed");
      if (error instanceof ReplError) throw error;
      throw new ReplError("WORKER_START_FAILED", describe(error), { cause: error });
    }
  }

  /**
   * Calls fn when the channel closes (soon, if it already has); returns the way to unhook it. Unlike
   * `closed.then`, a hook that is removed is released: one per run would otherwise pile up for the
   * worker's whole life.
   */
  onClose(fn: () => void): () => void {
    if (this.channelClosed) {
      queueMicrotask(fn);
      return () => {};
    }
    this.closeListeners.add(fn);
    return () => this.closeListeners.delete(fn);
  }

  get alive(): boolean {
    return this.closeReason === undefined;
  }

  /** Queues one frame. Rejects if it does not fit, the queue stays full, or the worker is gone. */
  send(frame: unknown): Promise<void> {
    let bytes: Uint8Array;
    try {
      bytes = encodeFrame(frame, FRAME_MAX_BYTES);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.sendEncoded(bytes);
  }

  /** Queues a frame already encoded (with its newline) within the frame limit. */
  sendEncoded(bytes: Uint8Array): Promise<void> {
    if (!this.alive) return Promise.reject(new ReplError("WORKER_CRASHED", "Python worker is not running"));
    return this.writer.push(bytes);
  }

  /** SIGKILL to every detached group the worker reported (they are outside the worker's own group). */
  killJobs(): void {
    for (const pgid of this.jobs) signalGroup(pgid, "SIGKILL");
  }

  private trackJob(pid: number, action: "started" | "finished"): void {
    if (pid <= 1 || this.contained) return;
    if (action === "started") {
      this.jobs.add(pid);
      this.guarded.registerJob(pid);
    } else if (this.jobs.delete(pid)) {
      this.guarded.jobFinished(pid);
    }
  }

  residentBytes(): number | undefined {
    return residentBytes(this.ready.pid);
  }

  /** SIGINT to the worker's group (to the contained worker alone); Python raises KeyboardInterrupt. */
  interrupt(): void {
    if (!this.contained) return void this.guarded.signal("SIGINT");
    try {
      process.kill(this.ready.pid, "SIGINT");
    } catch {
      // Already gone: the run sees the channel close.
    }
  }

  /** Kills it, saying why: a run in flight ends with this failure. */
  lose(loss: Failure): void {
    this.loss ??= loss;
    void this.kill("killed");
  }

  /** Kills the whole group at once and waits until it is gone. */
  async kill(reason: CloseReason = "killed"): Promise<void> {
    this.closeReason ??= reason;
    this.killJobs();
    await this.guarded.stop(0);
    await this.closed;
  }

  /** Asks the worker to leave (stdin EOF), then makes sure the group and its jobs are gone. */
  async stop(): Promise<void> {
    this.closeReason ??= "killed";
    this.writer.close();
    await this.guarded.stop(WORKER_EXIT_WAIT_MS);
    this.killJobs();
    await this.closed;
  }

  private async readFrames(): Promise<void> {
    const splitter = new LineSplitter(FRAME_MAX_BYTES);
    let sawReady = false;
    try {
      for await (const chunk of this.guarded.stdout) {
        for (const line of splitter.push(chunk)) {
          const frame = parseWorkerFrame(JSON.parse(decodeLine(line)));
          if (!frame) continue;
          if (!sawReady) {
            if (frame.type !== "ready")
              throw new ReplError("WORKER_START_FAILED", "Invalid Python worker handshake");
            sawReady = true;
            this.readySignal?.resolve(frame);
            continue;
          }
          if (frame.type === "job") this.trackJob(frame.pid, frame.action);
          else this.onFrame(frame);
        }
      }
    } catch (error) {
      // Oversized, undecodable or malformed output means the worker can no longer be trusted.
      const message =
        error instanceof FrameTooLargeError
          ? `worker frame exceeds ${sizeText(FRAME_MAX_BYTES)}`
          : (error as Error).message;
      log.debug("worker channel broken:", message);
      if (!sawReady) this.readySignal?.reject(error instanceof ReplError ? error : new Error(message));
      this.closeReason ??= "broken";
      void this.guarded.stop(0);
    }
    this.closeReason ??= "exited";
    this.writer.close();
    this.guarded.closeControl();
  }
}
