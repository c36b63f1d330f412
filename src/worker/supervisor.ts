// One session's worker supervisor: it owns the worker's lifecycle, the generation counter, the
// single execution slot, deadlines (SIGINT, grace, kill), the RSS budget, and turns whatever happened
// into an execution result. Lower layers report through return values and callbacks only.
import { randomUUID } from "node:crypto";
import { describe } from "../errors.ts";
import {
  CODE_MAX_BYTES,
  INTERRUPT_GRACE_MS,
  RSS_SAMPLE_INTERVAL_MS,
  STDERR_DRAIN_BARRIER_MS,
  STREAM_CAPTURE_MAX_BYTES,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
} from "../limits.ts";
import { cutUtf8, utf8Bytes } from "../text/utf8.ts";
import type { ReadyFrame, WorkerResult } from "./frames.ts";
import { type WorkerLaunch, WorkerProcess } from "./process.ts";
import { type ExecutionResult, Messages } from "./result.ts";
import { residentBytes } from "./rss.ts";

export interface SupervisorOptions {
  serverId: string;
  sessionId: string;
  /** Where and how to start a worker; `python` may be refined to the real interpreter after a start. */
  launch: WorkerLaunch;
  maxMemoryMib: number;
}

export interface ExecuteRequest {
  code: string;
  timeoutSeconds: number;
  reset: boolean;
  expectedGeneration?: number;
  signal?: AbortSignal;
}

type Outcome =
  | { kind: "result"; result: WorkerResult }
  | { kind: "closed" }
  | { kind: "deadline" }
  | { kind: "cancelled" }
  | { kind: "rss" };

export class Supervisor {
  generation = 0;
  python: ReadyFrame | undefined;
  activeRunId: string | undefined;
  private worker: WorkerProcess | undefined;
  /** A worker existed and died on its own: the next start is a recovery. */
  private lost = false;
  private closed = false;
  private realPython: string | undefined;

  constructor(private readonly options: SupervisorOptions) {}

  get running(): boolean {
    return this.worker?.alive ?? false;
  }

  get launch(): WorkerLaunch {
    return this.options.launch;
  }

  async execute(request: ExecuteRequest): Promise<ExecutionResult> {
    const runId = randomUUID();
    const startedAt = performance.now();
    const early = (error: string, extra: Partial<ExecutionResult> = {}) =>
      this.result(runId, startedAt, { error, state: "preserved", state_reset: false, ...extra });

    const timeout = request.timeoutSeconds;
    if (
      utf8Bytes(request.code) > CODE_MAX_BYTES ||
      !(timeout >= TIMEOUT_MIN_SECONDS && timeout <= TIMEOUT_MAX_SECONDS)
    ) {
      return early(Messages.limits);
    }
    if (this.closed) return early(Messages.closed);
    if (this.activeRunId) return early(Messages.busy);
    if (request.expectedGeneration !== undefined && request.expectedGeneration !== this.generation) {
      return early(Messages.staleGeneration);
    }
    if (request.signal?.aborted) return early(Messages.cancelledBeforeDispatch);

    this.activeRunId = runId;
    try {
      let stateReset = false;
      if (request.reset && this.worker) await this.discardWorker();
      if (!this.worker?.alive) {
        const recovering = this.lost && !request.reset;
        try {
          await this.startWorker();
        } catch (error) {
          return this.result(runId, startedAt, {
            error: describe(error),
            state: "cleared",
            state_reset: true,
          });
        }
        stateReset = true;
        if (recovering && (request.expectedGeneration ?? 0) > 0) {
          return early(Messages.restarted, { state_reset: true });
        }
      }
      if (request.signal?.aborted)
        return early(Messages.cancelledBeforeDispatch, { state_reset: stateReset });
      return await this.run(runId, startedAt, request, stateReset);
    } finally {
      this.activeRunId = undefined;
    }
  }

  /** Stops the worker for good (server shutdown or session close). */
  async shutdown(): Promise<void> {
    this.closed = true;
    await this.discardWorker();
  }

  private async startWorker(): Promise<void> {
    this.worker = undefined;
    this.python = undefined;
    this.generation++;
    const launch = { ...this.options.launch, python: this.realPython ?? this.options.launch.python };
    const worker = await WorkerProcess.start(launch);
    this.worker = worker;
    this.python = worker.ready;
    // A PATH entry may be a slow shim (pyenv); later starts go straight to the interpreter it ran.
    if (worker.ready.python_executable.startsWith("/")) this.realPython = worker.ready.python_executable;
    this.lost = false;
    void worker.closed.then(() => {
      if (this.worker === worker) this.lost = true;
    });
  }

  private async discardWorker(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.lost = false;
    if (worker) await worker.stop();
  }

  private async run(
    runId: string,
    startedAt: number,
    request: ExecuteRequest,
    stateReset: boolean,
  ): Promise<ExecutionResult> {
    const worker = this.worker as WorkerProcess;
    const live = { stdout: "", stderr: "" };
    let deliver!: (outcome: Outcome) => void;
    const outcome = new Promise<Outcome>((resolve) => {
      deliver = resolve;
    });
    worker.stderr.reset();
    worker.onFrame = (frame) => {
      if (frame.type === "output" && frame.id === runId) {
        if (utf8Bytes(live[frame.stream]) < STREAM_CAPTURE_MAX_BYTES) live[frame.stream] += frame.text;
      } else if (frame.type === "result" && frame.id === runId) {
        deliver({ kind: "result", result: frame.result });
      }
    };
    void worker.closed.then(() => deliver({ kind: "closed" }));
    const deadline = setTimeout(() => deliver({ kind: "deadline" }), request.timeoutSeconds * 1000);
    const onAbort = () => deliver({ kind: "cancelled" });
    request.signal?.addEventListener("abort", onAbort, { once: true });
    const rssTimer = this.watchMemory(worker, () => deliver({ kind: "rss" }));

    try {
      worker
        .send({ type: "execute", id: runId, code: request.code, timeout: request.timeoutSeconds })
        .catch(() => worker.kill("broken"));
      const first = await outcome;
      if (first.kind === "deadline" || first.kind === "cancelled") {
        const reason = first.kind === "deadline" ? Messages.timedOut : Messages.cancelled;
        return await this.interrupt(worker, runId, startedAt, reason, stateReset, live);
      }
      if (first.kind === "rss") {
        await worker.kill();
        return this.afterLoss(runId, startedAt, Messages.rss, stateReset, live, worker);
      }
      if (first.kind === "closed") {
        return this.afterLoss(runId, startedAt, Messages.crashed, stateReset, live, worker);
      }
      await worker.stderr.barrier(runId, STDERR_DRAIN_BARRIER_MS);
      return this.fromWorker(runId, startedAt, first.result, stateReset, worker);
    } finally {
      clearTimeout(deadline);
      if (rssTimer) clearInterval(rssTimer);
      request.signal?.removeEventListener("abort", onAbort);
      worker.onFrame = () => {};
    }
  }

  /** Deadline or cancel: SIGINT, then a short grace for the worker to report, else kill. */
  private async interrupt(
    worker: WorkerProcess,
    runId: string,
    startedAt: number,
    reason: string,
    stateReset: boolean,
    live: { stdout: string; stderr: string },
  ): Promise<ExecutionResult> {
    // The first outcome promise already settled; listen for the worker's own answer afresh.
    let answer!: (o: Outcome | "grace") => void;
    const next = new Promise<Outcome | "grace">((resolve) => {
      answer = resolve;
    });
    worker.onFrame = (frame) => {
      if (frame.type === "output" && frame.id === runId) live[frame.stream] += frame.text;
      else if (frame.type === "result" && frame.id === runId)
        answer({ kind: "result", result: frame.result });
    };
    void worker.closed.then(() => answer({ kind: "closed" }));
    const grace = setTimeout(() => answer("grace"), INTERRUPT_GRACE_MS);
    worker.interrupt();
    const settled = await next;
    clearTimeout(grace);
    if (settled === "grace") {
      await worker.kill();
      return this.afterLoss(
        runId,
        startedAt,
        `${reason}; worker did not stop; variables cleared`,
        stateReset,
        live,
        worker,
      );
    }
    if (settled.kind !== "result") {
      return this.afterLoss(
        runId,
        startedAt,
        `${reason}; worker exited; variables cleared`,
        stateReset,
        live,
        worker,
      );
    }
    await worker.stderr.barrier(runId, STDERR_DRAIN_BARRIER_MS);
    const result = this.fromWorker(runId, startedAt, settled.result, stateReset, worker);
    return { ...result, success: false, error: reason };
  }

  private async afterLoss(
    runId: string,
    startedAt: number,
    error: string,
    stateReset: boolean,
    live: { stdout: string; stderr: string },
    worker: WorkerProcess,
  ): Promise<ExecutionResult> {
    await worker.closed;
    if (this.worker === worker) {
      this.worker = undefined;
      this.lost = true;
    }
    const native = worker.stderr.take();
    return this.result(runId, startedAt, {
      error,
      state: "cleared",
      state_reset: stateReset,
      stdout: live.stdout,
      stderr: live.stderr + native.text,
    });
  }

  private fromWorker(
    runId: string,
    startedAt: number,
    result: WorkerResult,
    stateReset: boolean,
    worker: WorkerProcess,
  ): ExecutionResult {
    const native = worker.stderr.take();
    const stderr = cutUtf8(result.stderr + native.text, STREAM_CAPTURE_MAX_BYTES);
    const { interrupted: _interrupted, ...fields } = result;
    return {
      ...this.identity(),
      ...fields,
      run_id: runId,
      stderr: stderr.text,
      truncated: { ...result.truncated, stderr: result.truncated.stderr || stderr.cut || native.truncated },
      elapsed_ms: elapsed(startedAt),
      state_reset: stateReset,
      execution_mode: "persistent",
    };
  }

  private result(
    runId: string,
    startedAt: number,
    fields: Pick<ExecutionResult, "error" | "state" | "state_reset"> & Partial<ExecutionResult>,
  ): ExecutionResult {
    const stdout = cutUtf8(fields.stdout ?? "", STREAM_CAPTURE_MAX_BYTES);
    const stderr = cutUtf8(fields.stderr ?? "", STREAM_CAPTURE_MAX_BYTES);
    return {
      ...this.identity(),
      run_id: runId,
      success: false,
      return_value: null,
      elapsed_ms: elapsed(startedAt),
      execution_mode: "persistent",
      ...fields,
      stdout: stdout.text,
      stderr: stderr.text,
      truncated: { stdout: stdout.cut, stderr: stderr.cut, return: false },
    };
  }

  private identity() {
    return {
      server_id: this.options.serverId,
      session_id: this.options.sessionId,
      generation: this.generation,
    };
  }

  private watchMemory(worker: WorkerProcess, onOver: () => void): ReturnType<typeof setInterval> | undefined {
    const limitBytes = this.options.maxMemoryMib * 1024 * 1024;
    if (limitBytes <= 0) return undefined;
    return setInterval(() => {
      const rss = residentBytes(worker.ready.pid);
      if (rss !== undefined && rss > limitBytes) onOver();
    }, RSS_SAMPLE_INTERVAL_MS);
  }
}

function elapsed(startedAt: number): number {
  return Math.round((performance.now() - startedAt) * 1000) / 1000;
}
