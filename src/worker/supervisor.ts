// One session's worker supervisor: it owns the persistent worker's lifecycle, the generation counter,
// the single execution slot, deadlines (SIGINT, grace, kill), the RSS budget, the run history, and turns
// whatever happened into an execution result. Lower layers report through return values and callbacks.
import { codeOf, describe, type ErrorCodeName, ReplError } from "../errors.ts";
import {
  BUSY_WAIT_WHILE_CANCELLING_MS,
  CODE_MAX_BYTES,
  HISTORY_ARCHIVED_PICTURES_MAX,
  INTERRUPT_GRACE_MS,
  RSS_SAMPLE_INTERVAL_MS,
  SANDBOX_DENIALS_MAX,
  STDERR_DRAIN_BARRIER_MS,
  STREAM_CAPTURE_MAX_BYTES,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
  WORKER_EXIT_WAIT_MS,
} from "../limits.ts";
import { log } from "../log.ts";
import type { RunningCell } from "../parking/protocol.ts";
import { cutUtf8, utf8Bytes } from "../text/utf8.ts";
import { waitAtMost } from "../timeout.ts";
import type { Handover, WorkerChannel, WorkerPurpose } from "./channel.ts";
import { Displays, type KeepDisplay } from "./displays.ts";
import { encodeExecuteFrame } from "./execute-frame.ts";
import type { ReadyFrame, SandboxDenial, WorkerResult } from "./frames.ts";
import { inlineImageBytes, RunHistory } from "./history.ts";
import { KeptWorker } from "./kept.ts";
import { type KeepLaunch, type WorkerLaunch, WorkerProcess } from "./process.ts";
import { picturesReleased } from "./reclaim.ts";
import { type ExecutionResult, type Failure, Failures, failed } from "./result.ts";
import { type Bridge, RpcDesk } from "./rpc.ts";
import { ActiveRun, type RunTask } from "./run.ts";

export interface SupervisorOptions {
  serverId: string;
  sessionId: string;
  /** Where and how to start a worker. */
  launch: WorkerLaunch;
  /**
   * How: the local worker process unless given (the seam a kernel session's worker plugs into). A
   * "fresh" worker serves one fresh file run and is stopped after it; a "reset" one starts the session's
   * namespace afresh.
   */
  startWorker?: (launch: WorkerLaunch, purpose: WorkerPurpose) => Promise<WorkerChannel>;
  /** Why a reset must be refused here (an attached kernel), if it must. */
  resetRefusal?: () => Failure | undefined;
  /** For a kept session: how its workers are kept (read at each start; undefined → not kept). */
  keep?: () => KeepLaunch | undefined;
  maxMemoryMib: number;
  /** Serves the cells' bridge requests (mcp.*); absent → they are refused. */
  bridge?: Bridge;
  /** Told when a run on the persistent or a fresh worker ends, however it ended. */
  onRunEnd?: (runId: string) => void;
  /** Keeps displays beyond the inline limits (as artifacts); absent → they are only described. */
  keepDisplay?: KeepDisplay;
  /** Lets go of the artifact of a picture archived earlier, once newer archived ones take its place. */
  dropDisplay?: (artifactId: string) => void;
  /** Contained sessions: what the sandbox refused a run outside its worker (hosts), taken once per run. */
  takeDenials?: (runId: string) => SandboxDenial[];
}

export interface RunRequest {
  task: RunTask;
  timeoutSeconds: number;
  reset: boolean;
  expectedGeneration?: number;
  /** The client's own cancellation (MCP notifications/cancelled). */
  signal?: AbortSignal;
  /** Inspections are not kept in the run history. */
  record?: boolean;
  /** Told about the run as soon as it holds the slot (progress reporting, tasks). */
  onRun?: (run: ActiveRun) => void;
}

/**
 * Someone watching a session's runs (the viewer). Unset, a run costs one property check more; set, it is
 * called synchronously and must neither throw nor block.
 */
export interface RunWatcher {
  /** A recorded run took the slot; its `done` settles once its result is in the history. */
  started(run: ActiveRun): void;
  /** A worker started or went away: the generation or the state changed. */
  changed(): void;
}

type Outcome =
  | { kind: "result"; result: WorkerResult }
  | { kind: "closed" }
  | { kind: "cancelled" }
  | { kind: "rss" }
  | { kind: "grace" };

type Fields = Pick<ExecutionResult, "error" | "error_code" | "state" | "state_reset"> &
  Partial<ExecutionResult>;

export class Supervisor {
  generation = 0;
  python: ReadyFrame | undefined;
  active: ActiveRun | undefined;
  readonly history = new RunHistory();
  watcher: RunWatcher | undefined;
  private worker: WorkerChannel | undefined;
  /** A worker existed and was lost (crash, kill, fatal cell): the next start is a recovery. */
  private lost = false;
  private closed = false;
  /** The artifacts of archived pictures, oldest first (archiveOlderPictures). */
  private readonly archivedPictures: { runId: string; artifactId: string }[] = [];
  private realPython: string | undefined;
  /** The memory check of the run in progress, and the interval that calls it. */
  private memoryCheck: (() => void) | undefined;
  private memoryTimer: ReturnType<typeof setInterval> | undefined;
  /** Work that must finish before the next run touches the worker (a default session's adoption). */
  private pending: Promise<void> | undefined;

  constructor(private readonly options: SupervisorOptions) {}

  private launchWorker(launch: WorkerLaunch, purpose: WorkerPurpose): Promise<WorkerChannel> {
    const start = this.options.startWorker;
    if (start) return start(launch, purpose);
    // A reset starts the session's next worker: kept like the first; a fresh file run's never is.
    const keep = purpose === "fresh" ? undefined : this.options.keep?.();
    return keep ? KeptWorker.start({ ...launch, keep }, this.generation + 1) : WorkerProcess.start(launch);
  }

  /** Runs wait for `work` (an adoption in progress) before they look at the worker. */
  waitFor(work: Promise<void>): void {
    const pending: Promise<void> = work
      .catch((error) => log.error("waiting before the first run failed:", error))
      .finally(() => {
        if (this.pending === pending) this.pending = undefined;
      });
    this.pending = pending;
  }

  /** Resolves once the work runs wait for (waitFor) is done. */
  async settledPending(): Promise<void> {
    await this.pending;
  }

  /**
   * Takes over a worker an earlier server kept (its generation goes on): a parked local worker, or a
   * kept kernel re-attached. A cell the worker was running holds the slot until its result comes (it
   * may be among the frames its guardian kept), and the result goes into the history like any other.
   */
  adopt(worker: WorkerChannel, handover: Handover): void {
    this.worker = worker;
    this.generation = handover.generation;
    this.python = worker.ready;
    this.lost = false;
    if (worker.ready.python_executable.startsWith("/")) this.realPython = worker.ready.python_executable;
    void worker.closed.then(() => {
      if (this.worker === worker) this.lost = true;
      this.watcher?.changed();
    });
    const running = handover.running;
    if (running && !this.active) this.adoptRun(worker, running);
    handover.begin?.();
    this.watcher?.changed();
  }

  private adoptRun(worker: WorkerChannel, running: RunningCell): void {
    const run = new ActiveRun(
      { kind: "adopted" },
      { id: running.id, startedAt: running.started_at, endedAt: running.ended_at },
    );
    this.active = run;
    const spent = (Date.now() - running.started_at) / 1000;
    const timeout = running.timeout_seconds > 0 ? running.timeout_seconds : TIMEOUT_MAX_SECONDS;
    const request: RunRequest = {
      task: run.task,
      timeoutSeconds: Math.max(TIMEOUT_MIN_SECONDS, timeout - spent),
      reset: false,
    };
    run.done = this.finish(
      run,
      request,
      () => {},
      async () => {
        const result = await this.runOn(worker, run, request, undefined, false);
        if (result.state === "cleared") await this.loseWorker(worker);
        return result;
      },
    );
    if (this.watcher) this.watcher.started(run);
  }

  /**
   * A worker an earlier server kept under this session's name is gone: the count goes on from its
   * generation and the next start is a recovery, so a cell that expects that generation is refused.
   */
  resumeLost(generation: number): void {
    if (this.worker || this.generation > 0) return;
    this.generation = generation;
    this.lost = true;
  }

  /**
   * The server is going and this session is kept: the worker is left to its guardian, which parks it (a
   * cell in progress goes on). An unkept worker is stopped as at any shutdown.
   */
  async letGo(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.worker = undefined;
    if (worker instanceof KeptWorker) await worker.park();
    else if (worker) await worker.stop();
  }

  get running(): boolean {
    return this.worker?.alive ?? false;
  }

  /** Reserves the slot and starts the run without waiting, or returns why it cannot start. */
  begin(request: RunRequest): ActiveRun | ExecutionResult {
    const timeout = request.timeoutSeconds;
    const code = request.task.kind === "cell" ? request.task.code : "";
    const refuse = (failure: Failure) => this.refusal(request.task, failure);
    if (
      utf8Bytes(code) > CODE_MAX_BYTES ||
      !(timeout >= TIMEOUT_MIN_SECONDS && timeout <= TIMEOUT_MAX_SECONDS)
    ) {
      return refuse(Failures.limits);
    }
    if (this.closed) return refuse(Failures.closed);
    if (this.active) return refuse(Failures.busy);
    const run = new ActiveRun(request.task);
    this.active = run;
    const onClientCancel = () => run.cancel(Failures.cancelled);
    // The client may have cancelled already (its notification can arrive before the handler runs):
    // an abort event that fired before we listened would otherwise be lost.
    if (request.signal?.aborted) onClientCancel();
    else request.signal?.addEventListener("abort", onClientCancel, { once: true });
    run.done = this.finish(run, request, onClientCancel);
    if (this.watcher && request.record !== false) this.watcher.started(run);
    request.onRun?.(run);
    return run;
  }

  /** Drives a run to its final result, which the history keeps; the slot is free once it settles. */
  private async finish(
    run: ActiveRun,
    request: RunRequest,
    onClientCancel: () => void,
    drive = () => this.drive(run, request),
  ): Promise<ExecutionResult> {
    try {
      let result: ExecutionResult;
      try {
        result = await drive();
      } catch (error) {
        log.error("run failed inside the supervisor (a bug):", error);
        result = this.result(run, {
          error: `Internal error: ${describe(error)}`,
          error_code: "INTERNAL",
          ...UNTOUCHED,
        });
      }
      if (result.displays) result = await this.keepDisplays(result);
      result = this.withDenials(result);
      if (request.record !== false) {
        this.history.add(result);
        // Still holding the slot, so archiving never overlaps itself and a closing session waits for it.
        await this.archiveOlderPictures().catch((error) => log.error("archiving pictures failed:", error));
      }
      return result;
    } finally {
      request.signal?.removeEventListener("abort", onClientCancel);
      if (this.active === run) this.active = undefined;
    }
  }

  /** The sandbox's refusals of this run: the worker's own, then the network's, SANDBOX_DENIALS_MAX at most. */
  private withDenials(result: ExecutionResult): ExecutionResult {
    const network = this.options.takeDenials?.(result.run_id) ?? [];
    if (network.length === 0) return result;
    const denials = [...(result.sandbox_denials ?? []), ...network].slice(0, SANDBOX_DENIALS_MAX);
    return { ...result, sandbox_denials: denials };
  }

  /** Set-aside displays become artifacts before the result is answered or enters the history. */
  private async keepDisplays(result: ExecutionResult): Promise<ExecutionResult> {
    if (!result.displays) return result;
    return { ...result, displays: await Displays.keepAside(result.displays, this.options.keepDisplay) };
  }

  /**
   * Older runs' inline pictures become artifacts, so a long session holds only its newest ones; of those
   * artifacts the session keeps the latest HISTORY_ARCHIVED_PICTURES_MAX.
   */
  private async archiveOlderPictures(): Promise<void> {
    for (const result of this.history.archivable()) {
      const keep = this.closed ? undefined : this.options.keepDisplay;
      const displays = await Displays.archive(result.displays ?? [], keep);
      this.history.replace(result, { ...result, displays });
      picturesReleased(inlineImageBytes(result));
      for (const display of displays) {
        if (display.archived && display.artifact) {
          this.archivedPictures.push({ runId: result.run_id, artifactId: display.artifact.id });
        }
      }
    }
    while (this.archivedPictures.length > HISTORY_ARCHIVED_PICTURES_MAX) {
      this.forgetPicture(this.archivedPictures.shift() as { runId: string; artifactId: string });
    }
  }

  /** An archived picture's artifact goes; its run, if still retained, only describes it from now on. */
  private forgetPicture({ runId, artifactId }: { runId: string; artifactId: string }): void {
    const result = this.history.get(runId);
    if (result?.displays) {
      const displays = result.displays.map((display) => {
        if (display.artifact?.id !== artifactId) return display;
        const { artifact: _, ...described } = display;
        return described;
      });
      this.history.replace(result, { ...result, displays });
    }
    this.options.dropDisplay?.(artifactId);
  }

  /** An execution-shaped answer for a request refused before it reached the slot. */
  refusal(task: RunTask, failure: Failure): ExecutionResult {
    return this.result(new ActiveRun(task), { ...failed(failure), ...UNTOUCHED });
  }

  /** Runs to completion. A run that is being cancelled gets a moment to release the slot first. */
  async execute(request: RunRequest): Promise<ExecutionResult> {
    await this.settled();
    const started = this.begin(request);
    return started instanceof ActiveRun ? started.done : started;
  }

  /** Resolves once a run that is being cancelled has released the slot, or after a moment at most. */
  async settled(): Promise<void> {
    const previous = this.active;
    if (previous?.cancelReason) await waitAtMost(previous.done, BUSY_WAIT_WHILE_CANCELLING_MS);
  }

  /** Cancels the active run (if `runId` matches). Returns the run that was asked to stop. */
  cancel(runId?: string): ActiveRun | undefined {
    const run = this.active;
    if (!run || (runId !== undefined && run.id !== runId)) return undefined;
    run.cancel(Failures.cancelled);
    return run;
  }

  /** Stops the session for good: cancels the active run, waits for it a while, then stops the worker. */
  async shutdown(waitMs: number): Promise<void> {
    this.closed = true;
    const run = this.active;
    if (run) {
      run.cancel(Failures.cancelled);
      await waitAtMost(run.done, waitMs);
    }
    await this.discardWorker();
  }

  private async drive(run: ActiveRun, request: RunRequest): Promise<ExecutionResult> {
    const refuse = (failure: Failure, extra: Partial<ExecutionResult> = {}) =>
      this.result(run, { ...failed(failure), ...UNTOUCHED, ...extra });
    if (request.expectedGeneration !== undefined && request.expectedGeneration !== this.generation) {
      return refuse(Failures.staleGeneration);
    }
    if (run.signal.aborted) return refuse(Failures.cancelledBeforeDispatch);
    if (this.pending) await this.pending;
    // Encoded before any worker starts: a cell within the code limit can still outgrow the frame once
    // escaped, and that must be a plain refusal rather than a failure halfway through dispatch.
    const frame = encodeExecuteFrame(run.id, run.task, request.timeoutSeconds);
    if (!frame) return refuse(Failures.frameLimit);
    if (run.task.kind === "file" && run.task.mode === "fresh") return this.driveFresh(run, request, frame);

    const refusal = request.reset ? this.options.resetRefusal?.() : undefined;
    if (refusal) return refuse(refusal);
    if (request.reset && this.worker) await this.discardWorker();
    return await this.driveOn(run, request, frame, true);
  }

  /** Runs on the session's worker, starting one if none is alive. */
  private async driveOn(
    run: ActiveRun,
    request: RunRequest,
    frame: Uint8Array,
    firstTry: boolean,
  ): Promise<ExecutionResult> {
    const refuse = (failure: Failure, extra: Partial<ExecutionResult> = {}) =>
      this.result(run, { ...failed(failure), ...UNTOUCHED, ...extra });
    let stateReset = false;
    if (!this.worker?.alive) {
      const recovering = this.lost && !request.reset;
      try {
        await this.startWorker(request.reset ? "reset" : "session");
      } catch (error) {
        return this.result(run, { ...startFailure(error), state: "cleared", state_reset: true });
      }
      stateReset = true;
      if (recovering && (request.expectedGeneration ?? 0) > 0) {
        return refuse(Failures.restarted, { state_reset: true });
      }
    }
    if (run.signal.aborted) return refuse(Failures.cancelledBeforeDispatch, { state_reset: stateReset });
    const worker = this.worker as WorkerChannel;
    const result = await this.runOn(worker, run, request, frame, stateReset);
    if (result.state !== "cleared") return result;
    await this.loseWorker(worker);
    if (worker.lostBefore === undefined || run.cancelReason !== undefined) return result;
    // The namespace was lost before the run reached it, and seen only during the run (a kernel that died
    // between cells): the call is answered as if the loss had been seen first. A run that never left
    // runs on the next worker, as after any loss between cells (or meets expected_generation's refusal).
    if (worker.lostBefore === "unsent" && firstTry) return await this.driveOn(run, request, frame, false);
    // A run that was sent is not sent again. The generation that follows the loss starts now, so that
    // this answer already carries it and the next call runs in it.
    try {
      await this.startWorker("session");
    } catch {
      return result;
    }
    return {
      ...result,
      ...this.identity(),
      error: `${result.error}. This cell had not reached the lost namespace and did not run; the next call runs in a fresh one`,
      state_reset: true,
    };
  }

  /** A fresh file run: its own worker of the same environment, leaving the session's namespace alone. */
  private async driveFresh(run: ActiveRun, request: RunRequest, frame: Uint8Array): Promise<ExecutionResult> {
    let worker: WorkerChannel;
    try {
      worker = await this.launchWorker(this.launchSpec(), "fresh");
    } catch (error) {
      return this.result(run, { ...startFailure(error), ...UNTOUCHED, execution_mode: "fresh" });
    }
    try {
      if (run.signal.aborted) {
        return this.result(run, {
          ...failed(Failures.cancelledBeforeDispatch),
          ...UNTOUCHED,
          execution_mode: "fresh",
        });
      }
      const result = await this.runOn(worker, run, request, frame, false);
      // The fresh worker is discarded either way; the session's own state is untouched.
      return { ...result, state: "preserved", execution_mode: "fresh" };
    } finally {
      await worker.stop();
    }
  }

  private launchSpec(): WorkerLaunch {
    return { ...this.options.launch, python: this.realPython ?? this.options.launch.python };
  }

  private async startWorker(purpose: WorkerPurpose): Promise<void> {
    this.worker = undefined;
    this.python = undefined;
    const worker = await this.launchWorker(this.launchSpec(), purpose);
    if (this.closed) {
      // The session was closed while its worker was starting: that worker must not outlive it.
      await worker.stop();
      throw new ReplError(Failures.closed.code, Failures.closed.message);
    }
    // Only a worker that started counts as a new generation; a failed start leaves the count alone.
    this.generation++;
    this.worker = worker;
    this.python = worker.ready;
    this.lost = false;
    // A PATH entry may be a slow shim (pyenv); later starts go straight to the interpreter it ran.
    if (worker.ready.python_executable.startsWith("/")) this.realPython = worker.ready.python_executable;
    void worker.closed.then(() => {
      if (this.worker === worker) this.lost = true;
      this.watcher?.changed();
    });
    this.watcher?.changed();
  }

  private async discardWorker(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.lost = false;
    if (worker) await worker.stop();
  }

  /** The worker's namespace is gone: make sure the process is too, and recover on the next run. */
  private async loseWorker(worker: WorkerChannel): Promise<void> {
    await waitAtMost(worker.closed, WORKER_EXIT_WAIT_MS);
    await worker.kill();
    if (this.worker === worker) {
      this.worker = undefined;
      this.lost = true;
    }
  }

  private async runOn(
    worker: WorkerChannel,
    run: ActiveRun,
    request: RunRequest,
    /** undefined: the run is already in the worker (adopted); nothing is sent. */
    frame: Uint8Array | undefined,
    stateReset: boolean,
  ): Promise<ExecutionResult> {
    let deliver!: (outcome: Outcome) => void;
    // Frames and timers deliver to whichever wait is current; a cancel starts a second one.
    const nextOutcome = () =>
      new Promise<Outcome>((resolve) => {
        deliver = resolve;
      });
    const outcome = nextOutcome();
    worker.stderr.reset();
    run.nativeStderr = () => worker.stderr.peek();
    const desk = new RpcDesk(worker, this.options.bridge);
    worker.onFrame = (frame) => {
      if (frame.type === "output" && frame.id === run.id) run.appendOutput(frame.stream, frame.text);
      else if (frame.type === "display" && frame.id === run.id) run.displays.add(frame);
      else if (frame.type === "result" && frame.id === run.id)
        deliver({ kind: "result", result: frame.result });
      else if (frame.type === "rpc") desk.handle(frame, run.id, run.cancelReason !== undefined);
      else if (frame.type === "rpc_cancel") desk.cancel(frame.id);
    };
    const unhooks = [worker.onClose(() => deliver({ kind: "closed" }))];
    const onCancel = () => deliver({ kind: "cancelled" });
    run.signal.addEventListener("abort", onCancel, { once: true });
    const deadline = setTimeout(() => run.cancel(Failures.timedOut), request.timeoutSeconds * 1000);
    const unwatch = this.watchMemory(worker, () => deliver({ kind: "rss" }));
    const loss = (failure: Failure) => this.afterLoss(run, worker, failure, stateReset);

    try {
      run.status = "running";
      if (frame) worker.sendEncoded(frame).catch(() => worker.kill("broken"));
      const first = await outcome;
      if (first.kind === "cancelled") {
        const second = nextOutcome();
        // A close that raced the cancel reached the first wait; the second needs its own hook.
        unhooks.push(worker.onClose(() => deliver({ kind: "closed" })));
        return await this.stopCancelled(worker, run, desk, stateReset, second, (next) => deliver(next));
      }
      if (first.kind === "rss") {
        await worker.kill();
        return await loss(Failures.rss);
      }
      if (first.kind === "result") return await this.fromWorker(run, worker, first.result, stateReset);
      return await loss(worker.loss ?? Failures.crashed);
    } finally {
      clearTimeout(deadline);
      for (const unhook of unhooks) unhook();
      unwatch();
      run.signal.removeEventListener("abort", onCancel);
      desk.abortAll();
      worker.onFrame = () => {};
      this.options.onRunEnd?.(run.id);
    }
  }

  /**
   * After a cancel: bridge calls and detached job groups first (they cannot see SIGINT), then SIGINT,
   * then a grace; a worker that does not answer in time is killed.
   */
  private async stopCancelled(
    worker: WorkerChannel,
    run: ActiveRun,
    desk: RpcDesk,
    stateReset: boolean,
    outcome: Promise<Outcome>,
    deliver: (outcome: Outcome) => void,
  ): Promise<ExecutionResult> {
    const reason = run.cancelReason ?? Failures.cancelled;
    const loss = (what: string) =>
      this.afterLoss(run, worker, { ...reason, message: `${reason.message}; ${what}` }, stateReset);
    const grace = setTimeout(() => deliver({ kind: "grace" }), INTERRUPT_GRACE_MS);
    desk.abortAll();
    worker.killJobs();
    // The frame queues behind this run's execute frame, so the worker learns of the cancel even if
    // the SIGINT lands before the cell is armed to receive it.
    worker.send({ type: "cancel", id: run.id }).catch(() => {});
    worker.interrupt();
    const next = await outcome;
    clearTimeout(grace);
    if (next.kind === "result") {
      const result = await this.fromWorker(run, worker, next.result, stateReset);
      // The cell ran to its end before the cancel reached it: its effects happened, so the record
      // says it succeeded rather than claiming a cancel that never took effect.
      if (next.result.success && !next.result.interrupted) return result;
      return { ...result, success: false, ...failed(reason) };
    }
    if (next.kind === "closed") return await loss("worker exited; variables cleared");
    await worker.kill();
    if (next.kind === "rss") return await this.afterLoss(run, worker, Failures.rss, stateReset);
    return await loss("worker did not stop; variables cleared");
  }

  private async afterLoss(
    run: ActiveRun,
    worker: WorkerChannel,
    failure: Failure,
    stateReset: boolean,
  ): Promise<ExecutionResult> {
    await worker.closed;
    const native = worker.stderr.take();
    return this.result(run, {
      ...failed(failure),
      state: "cleared",
      state_reset: stateReset,
      stdout: run.live.stdout,
      stderr: run.live.stderr + native.text,
    });
  }

  private async fromWorker(
    run: ActiveRun,
    worker: WorkerChannel,
    result: WorkerResult,
    stateReset: boolean,
  ): Promise<ExecutionResult> {
    // Without a barrier the worker saw its stderr channel fully read before it wrote this result. Bun
    // (checked on 1.4.4) hands each chunk it reads from a pipe to the waiting reader in the same turn,
    // so those bytes reached the drain before this later-read frame: nothing of the cell's is missing.
    if (result.stderr_barrier !== false) await worker.stderr.barrier(run.id, STDERR_DRAIN_BARRIER_MS);
    const native = worker.stderr.take();
    const stderr = cutUtf8(result.stderr + native.text, STREAM_CAPTURE_MAX_BYTES);
    const {
      interrupted: _interrupted,
      fatal,
      error_code: internal,
      stderr_barrier: _barrier,
      ...fields
    } = result;
    return {
      ...this.identity(),
      ...fields,
      error_code: result.success ? null : (internal ?? (fatal ? "WORKER_FATAL" : "PYTHON_EXCEPTION")),
      run_id: run.id,
      stderr: stderr.text,
      truncated: { ...result.truncated, stderr: result.truncated.stderr || stderr.cut || native.truncated },
      elapsed_ms: run.elapsedMs(),
      state_reset: stateReset,
      execution_mode: "persistent",
      ...displaysOf(run),
    };
  }

  private result(run: ActiveRun, fields: Fields): ExecutionResult {
    const stdout = cutUtf8(fields.stdout ?? "", STREAM_CAPTURE_MAX_BYTES);
    const stderr = cutUtf8(fields.stderr ?? "", STREAM_CAPTURE_MAX_BYTES);
    return {
      ...this.identity(),
      run_id: run.id,
      success: false,
      return_value: null,
      elapsed_ms: run.elapsedMs(),
      execution_mode: "persistent",
      ...displaysOf(run),
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

  /**
   * Samples the worker's RSS while the run lasts. One interval serves runs that follow each other, so
   * a burst of short cells arms no timer per cell; the first tick that finds no run stops it.
   */
  private watchMemory(worker: WorkerChannel, onOver: () => void): () => void {
    const limitBytes = this.options.maxMemoryMib * 1024 * 1024;
    if (limitBytes <= 0) return () => {};
    const check = () => {
      const rss = worker.residentBytes();
      if (rss !== undefined && rss > limitBytes) onOver();
    };
    this.memoryCheck = check;
    this.memoryTimer ??= setInterval(() => {
      if (this.memoryCheck) return this.memoryCheck();
      clearInterval(this.memoryTimer);
      this.memoryTimer = undefined;
    }, RSS_SAMPLE_INTERVAL_MS);
    return () => {
      if (this.memoryCheck === check) this.memoryCheck = undefined;
    };
  }
}

/** A worker that did not start: its own code when it says why, else a start failure. */
function startFailure(error: unknown): { error: string; error_code: ErrorCodeName } {
  return {
    error: describe(error),
    error_code: error instanceof ReplError ? codeOf(error) : "WORKER_START_FAILED",
  };
}

function displaysOf(run: ActiveRun): Pick<ExecutionResult, "displays"> {
  const displays = run.displays.list();
  return displays ? { displays } : {};
}

/** Refused or failed before touching the worker: nothing about the namespace changed. */
const UNTOUCHED = { state: "preserved", state_reset: false } as const;
