// One life of a session's Jupyter kernel as the supervisor sees it: a WorkerChannel whose frames travel
// over the kernel's own channels (docs/worker-protocol.md, "Inside a Jupyter kernel"). An execute frame
// becomes an execute_request of kernel_run(<frame>); the engine's frames come back as comm messages on
// iopub; frames for the engine (bridge answers, rpc_wait, cancel) answer the input request the engine
// holds open on stdin while a run lasts. The life ends when the namespace is lost (the kernel died, was
// restarted, is gone, a fatal cell) or when the supervisor stops or kills it; the seat (seat.ts) decides
// what a next life starts from. A connection that drops does not end it: the kernel and its namespace
// outlive the WebSocket (as in JupyterLab), and only a run that waits past KERNEL_RECONNECT_WAIT_MS for
// it is answered without its end (KERNEL_CONNECTION_LOST, the namespace kept).
import { FRAME_MAX_BYTES, KERNEL_RECONNECT_WAIT_MS } from "../limits.ts";
import { log } from "../log.ts";
import type { CloseReason, LostBefore, WorkerChannel } from "../worker/channel.ts";
import { parseWorkerFrame, type ReadyFrame, type WorkerFrame, type WorkerResult } from "../worker/frames.ts";
import { NativeStderr } from "../worker/native-stderr.ts";
import type { Failure } from "../worker/result.ts";
import type { KernelLink, LinkState } from "./jupyter.ts";
import { connectionLost, interruptedBeforeStart, newRun, type RunExchange } from "./run-exchange.ts";

/** The prompt of the engine's held input request (worker.py KERNEL_POLL_PROMPT). */
export const POLL_PROMPT = "\u0000repl-mcp frames";
/** The comm the engine's frames travel on (worker.py KERNEL_COMM). */
const COMM_ID = "repl-mcp";

/** How a life ended, for the seat: what the next life has to start from. */
export type LifeEnd =
  /** The supervisor stopped it (a reset, a close, a fresh run's end): the namespace is to be discarded. */
  | "stopped"
  /** Killed while a run may still be going: restart the kernel now. */
  | "killed"
  /** The kernel's server restarted it (it died): the kernel is already fresh. */
  | "restarted"
  /** The kernel is gone (dead, deleted, its server lost it). */
  | "gone";

export interface LifeOwner {
  /** Which server and kernel, for messages: `kernel 1f2e… on "gpu"`. */
  readonly label: string;
  /** Told once; what it returns (a kernel shut down) is awaited by `stop`. */
  ended(worker: KernelWorker, how: LifeEnd): Promise<void> | undefined;
}

export class KernelWorker implements WorkerChannel {
  readonly stderr = NativeStderr.unseen();
  onFrame: (frame: WorkerFrame) => void = () => {};
  readonly closed: Promise<CloseReason>;
  /** Why the namespace was lost, when the kernel side says so better than "the worker crashed". */
  loss: Failure | undefined;
  /** Whether the run in flight when the namespace was lost never reached it (channel.ts). */
  lostBefore: LostBefore | undefined;
  private closeReason: CloseReason | undefined;
  private resolveClosed!: (reason: CloseReason) => void;
  private readonly listeners = new Set<() => void>();
  private run: RunExchange | undefined;
  private readonly unhooks: (() => void)[];
  /** A run's wait for a connection that is down. */
  private waitTimer: ReturnType<typeof setTimeout> | undefined;
  /** The connection is down (and the kernel behind it must be checked again once it is back). */
  private down = false;
  /** How many times the connection dropped during this life. */
  private epoch = 0;
  /** The messaging session of the kernel process this life started on (see `replaced`). */
  private readonly kernelSession: Promise<string | undefined>;
  private session: string | undefined;
  /** What the owner does once this life ended. */
  private ending: Promise<void> | undefined;

  /** This life's comm to the engine, when the kernel takes runs as comm messages. */
  private readonly commId: string | undefined;

  constructor(
    readonly link: KernelLink,
    readonly ready: ReadyFrame & { comm?: boolean },
    private readonly owner: LifeOwner,
  ) {
    if (ready.comm) {
      this.commId = crypto.randomUUID();
      link.openComm(COMM_ID, this.commId);
    }
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    this.kernelSession = link.kernelSession().catch(() => undefined);
    void this.kernelSession.then((session) => {
      this.session = session;
    });
    this.unhooks = [
      link.onStatus((status) => {
        // "restarting" we did not ask for (we end this life before restarting) is the server's restart
        // of a kernel that died; "autorestarting" is how the connection reports it.
        if (status === "restarting" || status === "autorestarting") {
          this.end("exited", "restarted", {
            code: "WORKER_CRASHED",
            message: `The kernel died (${owner.label}) and its server restarted it; variables cleared`,
          });
        } else if (status === "dead") {
          this.end("exited", "gone", {
            code: "WORKER_CRASHED",
            message: `The kernel is dead (${owner.label}); variables cleared. The next run starts a new one`,
          });
        }
      }),
      link.onConnection((status) => this.onConnection(status)),
    ];
  }

  get alive(): boolean {
    return this.closeReason === undefined;
  }

  onClose(fn: () => void): () => void {
    if (!this.alive) {
      fn();
      return () => {};
    }
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  async send(frame: unknown): Promise<void> {
    if (!this.alive) throw new Error("the kernel's session ended");
    const { type, id } = frame as { type?: unknown; id?: unknown };
    if (type === "execute") return this.execute(frame as { id: string });
    if (type === "shutdown") return;
    const run = this.run;
    // A frame for a run that already ended (a cancel racing its result) has nobody to read it.
    if (!run || run.done || (type === "cancel" && id !== run.id)) return;
    run.queue.push(frame);
    run.wake?.();
  }

  sendEncoded(bytes: Uint8Array): Promise<void> {
    return this.send(JSON.parse(new TextDecoder().decode(bytes)));
  }

  /** Jobs a cell started run on the kernel's host, out of the server's reach (docs/kernels.md). */
  killJobs(): void {}

  interrupt(): void {
    const run = this.run;
    if (run && !run.sent) {
      // Still waiting for the connection: nothing of it ran, and the kernel (perhaps running someone
      // else's cell) is left alone.
      this.settle(run, interruptedBeforeStart(run.id));
      return;
    }
    if (run) run.interrupted = true;
    this.link.interrupt().catch((error) => log.debug("kernel interrupt failed:", error));
  }

  /** A kernel's memory is on its host; the server cannot sample it (--max-memory-mib does not apply). */
  residentBytes(): number | undefined {
    return undefined;
  }

  async kill(reason: CloseReason = "killed"): Promise<void> {
    this.end(reason, "killed");
  }

  async stop(): Promise<void> {
    this.end("exited", "stopped");
    await this.ending;
  }

  /**
   * Takes one run; it is sent to the engine over a live connection, at once or once the connection is
   * back. Its frames arrive through onFrame, the result last.
   */
  private async execute(frame: { id: string }): Promise<void> {
    const run = newRun(frame);
    this.run = run;
    // Sent only over a live connection: a run the services queued while it is down could still go out
    // long after it was answered as not sent.
    if (this.link.connectionStatus === "connected") this.dispatch(run);
    else this.awaitConnection(run);
  }

  private dispatch(run: RunExchange): void {
    run.sent = true;
    run.epoch = this.epoch;
    // Another client may have restarted the kernel since the last run, and its restart notice may never
    // reach us (iopub is resubscribed after the kernel's first messages). Asking which process answers,
    // just ahead of the run on the same channel, costs no round trip: the reply comes before the kernel
    // takes the run, which a new process would ignore. The answer also says, should this life end before
    // the run does, whether this life's process can have taken the run (`untouched`).
    const asked = this.link.kernelSession();
    asked.then(
      (session) => {
        run.answeredBy = session;
      },
      () => {},
    );
    void Promise.all([this.kernelSession, asked]).then(
      ([mine, now]) => {
        if (mine !== undefined && now !== mine) this.endReplaced();
      },
      () => {},
    );
    const text = run.text;
    const follow = {
      allowStdin: true,
      onIopub: (message: { msgType: string; content: Record<string, unknown> }) => {
        if (message.msgType === "comm_msg") this.onComm(run, message.content);
      },
      onInput: (prompt: string) => {
        run.seen = true;
        return this.answer(run, prompt);
      },
    };
    // A comm message when the kernel takes them (ipykernel): no IPython run_cell around the run. A
    // request without a reply ends when the kernel is idle again; its "status" is then unknown.
    const finished = this.commId
      ? this.link.message(this.commId, { frame: text }, follow).then(() => ({ status: undefined }))
      : this.link.execute(`__import__("repl_mcp_engine").kernel_run(${JSON.stringify(text)})`, follow);
    this.afterRequest(run, finished);
  }

  /** The run's request ended: with the run's result before it (as it should), or without. */
  private afterRequest(run: RunExchange, finished: Promise<{ status: string | undefined }>): void {
    finished.then(
      (reply) => {
        run.done = true;
        run.seen = true;
        run.wake?.();
        if (!this.alive || this.run !== run) return;
        this.run = undefined;
        // The request ended and no result came: kernel_run itself failed (an engine that did not
        // load, a frame it refused). The engine is not usable.
        // An interrupt that reached the kernel before the engine took the request over stops the
        // request there: nothing of the cell ran, and the namespace is as it was.
        if (!run.resulted && run.interrupted) {
          this.onFrame({ type: "result", id: run.id, result: interruptedBeforeStart(run.id) });
          return;
        }
        if (!run.resulted) {
          // A kernel restarted behind our back (another client, or a restart notice lost with a dropped
          // WebSocket) no longer knows the engine: the run ends without a result. Say what happened.
          void this.replaced().then((replaced) => {
            if (replaced) this.endReplaced();
            else
              this.end("broken", "killed", {
                code: "WORKER_CRASHED",
                message: `The kernel ended the run without a result (${this.owner.label}, reply ${reply.status ?? "none"}); the session restarts it on the next run`,
              });
          });
        }
      },
      (error: unknown) => {
        run.done = true;
        run.wake?.();
        // A restart, a death or a dispose drops the request after the status and connection hooks ended
        // this life. Dropped while the life goes on, nobody else would end the run: it would wait forever.
        if (!this.alive || this.run !== run) return;
        this.run = undefined;
        this.end("broken", "killed", {
          code: "WORKER_CRASHED",
          message:
            `The connection to the kernel (${this.owner.label}) dropped the run ` +
            `(${error instanceof Error ? error.message : String(error)}): whether it ran is unknown. ` +
            "The next run starts from a restarted kernel (variables cleared)",
        });
      },
    );
  }

  private onComm(run: RunExchange, content: Record<string, unknown>): void {
    if (content.comm_id !== COMM_ID) return;
    run.seen = true;
    const text = (content.data as { frame?: unknown } | undefined)?.frame;
    let frame: WorkerFrame | undefined;
    try {
      if (typeof text !== "string" || text.length > FRAME_MAX_BYTES) throw new Error("oversized or missing");
      frame = parseWorkerFrame(JSON.parse(text));
    } catch (error) {
      log.warn(`malformed frame from the kernel (${this.owner.label}):`, error);
      this.end("broken", "killed");
      return;
    }
    if (!frame) return;
    if (frame.type === "result") {
      run.resulted = true;
      // The engine's input request ends with the run; a fatal result leaves a namespace to discard.
      run.queue.push({ type: "end" });
      run.wake?.();
      this.onFrame(frame);
      if (frame.result.fatal) this.end("exited", "killed");
      return;
    }
    this.onFrame(frame);
  }

  /** Answers the engine's held input request with the frames queued for it, once there are some. */
  private async answer(run: RunExchange, prompt: string): Promise<string> {
    // Any other prompt is a cell's own input() outside the engine's reach: it gets an empty line.
    if (prompt !== POLL_PROMPT) return "";
    while (run.queue.length === 0 && !run.done && this.alive) {
      await new Promise<void>((resolve) => {
        run.wake = resolve;
      });
    }
    run.wake = undefined;
    if (run.queue.length === 0) return JSON.stringify([{ type: "end" }]);
    return JSON.stringify(run.queue.splice(0));
  }

  private onConnection(status: LinkState): void {
    if (status === "gone") {
      this.end("exited", "gone", {
        code: "WORKER_CRASHED",
        message: `The kernel is gone (${this.owner.label}: its server no longer has it); variables cleared. The next run starts a new one`,
      });
      return;
    }
    if (status === "connected") {
      clearTimeout(this.waitTimer);
      this.waitTimer = undefined;
      const wasDown = this.down;
      this.down = false;
      const run = this.run;
      // A run that waited goes now; the question sent ahead of it checks the kernel behind the connection.
      if (run && !run.sent) {
        this.dispatch(run);
        return;
      }
      // While the WebSocket was down, the server may have restarted the kernel; its notice went to
      // nobody, and the services adopt the new process silently. A run sent to it would wait forever.
      if (wasDown) {
        void this.replaced().then((replaced) => {
          if (replaced) this.endReplaced();
        });
      }
      return;
    }
    if (!this.down) {
      this.down = true;
      this.epoch++;
    }
    // Between runs the connection may take its time (a run that comes asks for it again); a run waits a
    // bounded while.
    if (this.run && !this.waitTimer) this.awaitConnection(this.run);
  }

  private awaitConnection(run: RunExchange): void {
    this.link.want();
    this.waitTimer ??= setTimeout(() => this.connectionLost(run), KERNEL_RECONNECT_WAIT_MS);
  }

  /**
   * The run waited for the connection the whole while: it is answered without its end, and the life goes
   * on. The kernel and its namespace were never seen to go; if they did, the next run finds out.
   */
  private connectionLost(run: RunExchange): void {
    this.waitTimer = undefined;
    if (!this.alive || this.run !== run) return;
    this.settle(run, connectionLost(run, this.owner.label));
  }

  /** Ends the exchange of a run with a result of our own (its request, if sent, is left to finish). */
  private settle(run: RunExchange, result: WorkerResult): void {
    clearTimeout(this.waitTimer);
    this.waitTimer = undefined;
    if (this.run === run) this.run = undefined;
    run.done = true;
    run.wake?.();
    this.onFrame({ type: "result", id: run.id, result });
  }

  /**
   * Whether a run in flight when this life's namespace was lost is known never to have reached it: never
   * sent, or sent without anything of it coming back and with the question sent just ahead of it answered
   * by another process, or by none over a connection that stayed up (the process that answers nothing
   * took nothing after it either: a kernel handles its requests in order).
   */
  private untouched(run: RunExchange): boolean {
    if (!run.sent) return true;
    if (run.seen) return false;
    if (run.answeredBy !== undefined) return this.session !== undefined && run.answeredBy !== this.session;
    return run.epoch === this.epoch && !this.down;
  }

  /**
   * Whether the kernel process behind the link is no longer the one this life started on: its kernel_info
   * reply carries another session. False when either reply does not come in time (a busy kernel answers
   * kernel_info only after its running cell).
   */
  private async replaced(): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(resolve, KERNEL_RECONNECT_WAIT_MS, undefined);
    });
    const now = this.link.kernelSession().catch(() => undefined);
    const [before, after] = await Promise.race([Promise.all([this.kernelSession, now]), late.then(() => [])]);
    clearTimeout(timer);
    return before !== undefined && after !== undefined && before !== after;
  }

  private endReplaced(): void {
    this.end("exited", "restarted", {
      code: "WORKER_CRASHED",
      message:
        `The kernel (${this.owner.label}) was restarted behind this session (it died, or its server or ` +
        "another client restarted it); variables cleared",
    });
  }

  private end(reason: CloseReason, how: LifeEnd, loss?: Failure): void {
    if (!this.alive) return;
    this.closeReason = reason;
    this.loss = loss;
    clearTimeout(this.waitTimer);
    for (const unhook of this.unhooks) unhook();
    const run = this.run;
    this.run = undefined;
    // Only a loss the kernel side reports (not one the supervisor or a broken run caused) can have come
    // before the run reached the namespace.
    if (run && (how === "restarted" || how === "gone") && this.untouched(run)) {
      this.lostBefore = run.sent ? "untouched" : "unsent";
    }
    if (run) {
      run.done = true;
      run.wake?.();
    }
    this.ending = this.owner.ended(this, how)?.catch((error) => log.warn("after a kernel life:", error));
    for (const listener of this.listeners) listener();
    this.listeners.clear();
    this.resolveClosed(reason);
  }
}
