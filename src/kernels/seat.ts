// A session's place on a Jupyter server: the kernel it started (owned) or attached to (the person's), and
// the lives of that kernel the supervisor runs cells on (kernel-worker.ts). Between lives the seat does
// what the last one's end asks for: nothing (the server restarted a dead kernel already), a restart (a
// reset, a kill), a new kernel (the old one is gone); each new life talks over a connection of its own. A
// dropped connection is not the end of a life (the kernel and its namespace outlive it), so it never
// costs a restart. An attached kernel is only ever restarted with the entry's allowReset; closing the
// session shuts down an owned kernel and leaves an attached one running.
import { ReplError } from "../errors.ts";
import { KERNEL_RESTART_TIMEOUT_MS } from "../limits.ts";
import { log } from "../log.ts";
import { withTimeout } from "../timeout.ts";
import type { WorkerPurpose } from "../worker/channel.ts";
import type { Failure } from "../worker/result.ts";
import type { KernelServer } from "./config.ts";
import { type EngineReady, loadEngine } from "./engine.ts";
import { serverFailure } from "./failure.ts";
import type { JupyterLink, KernelLink } from "./jupyter.ts";
import { KernelWorker, type LifeEnd, type LifeOwner } from "./kernel-worker.ts";
import type { OwnedKernels } from "./owned.ts";

export interface SeatRequest {
  server: KernelServer;
  link: JupyterLink;
  owned: OwnedKernels;
  /** A kernelspec to start (else the entry's, else the server's default). */
  kernel?: string;
  /** A running kernel to attach to instead. */
  kernelId?: string;
  /**
   * kernelId is the kernel a kept session of this name left running: it is attached to and then owned
   * again (shut down when the session closes).
   */
  adopt?: boolean;
  /** A directory on the kernel's host to work in (else the kernel's own). */
  project?: string;
}

/** What to do before the next life. */
type Next = "use" | "reload" | "restart" | "replace";

export class KernelSeat implements LifeOwner {
  readonly owned: boolean;
  readonly server: KernelServer;
  /** The engine's ready answer of the latest life: Python, pid, cwd on the kernel's host. */
  ready: EngineReady;
  private kernel: KernelLink;
  private prepared: KernelWorker | undefined;
  private next: Next = "use";
  private pending: Promise<void> | undefined;
  private closed = false;

  private constructor(
    private readonly request: SeatRequest,
    kernel: KernelLink,
    ready: EngineReady,
  ) {
    this.server = request.server;
    this.owned = request.kernelId === undefined || request.adopt === true;
    this.kernel = kernel;
    this.ready = ready;
    this.prepared = new KernelWorker(kernel, ready, this);
  }

  /** Starts or attaches to the kernel and loads the engine; an owned kernel that fails is shut down. */
  static async open(request: SeatRequest): Promise<KernelSeat> {
    const { server, link } = request;
    let kernel: KernelLink;
    if (request.kernelId !== undefined) {
      kernel = await attach(request, request.kernelId);
      if (request.adopt) request.owned.add(server, kernel.id);
    } else {
      await checkSpec(request);
      try {
        kernel = await link.start(request.kernel);
      } catch (error) {
        throw serverFailure(server, "starting a kernel", error);
      }
      request.owned.add(server, kernel.id);
    }
    try {
      const ready = await withTimeout(
        loadEngine(kernel, labelOf(server, kernel), request.project),
        server.startTimeoutMs,
        () => {
          throw new ReplError(
            "KERNEL_SERVER_FAILED",
            `The kernel (${labelOf(server, kernel)}) did not answer within startTimeoutS (${server.startTimeoutMs / 1000} s)`,
          );
        },
      );
      return new KernelSeat(request, kernel, ready);
    } catch (error) {
      await release(request, kernel, request.kernelId === undefined || request.adopt === true);
      throw error instanceof ReplError ? error : serverFailure(server, "loading the engine", error);
    }
  }

  get label(): string {
    return labelOf(this.server, this.kernel);
  }

  get kernelId(): string {
    return this.kernel.id;
  }

  get kernelName(): string {
    return this.kernel.name;
  }

  /** Why a reset must not happen here, if it must not. */
  resetRefusal(): Failure | undefined {
    if (this.owned || this.server.allowReset) return undefined;
    return {
      code: "KERNEL_RESET_REFUSED",
      message:
        `A reset would restart ${this.label}, which this session attached to and did not start (the ` +
        `person's variables would be lost); set "allowReset": true in the "${this.server.name}" entry to allow it`,
    };
  }

  /**
   * The supervisor's next worker: the prepared first life, or a new one after whatever ended the last. A
   * reset restarts the kernel on the first call as on any later one: the prepared life holds whatever
   * the kernel held when the session opened (an attached kernel's variables, for one).
   */
  async startLife(purpose: WorkerPurpose = "session"): Promise<KernelWorker> {
    if (this.closed) throw new ReplError("SESSION_CLOSED", "Session is closed");
    const prepared = this.prepared;
    this.prepared = undefined;
    if (prepared?.alive && purpose !== "reset") return prepared;
    // Its end ("stopped") asks for the restart.
    if (prepared?.alive) await prepared.stop();
    try {
      await this.pending;
    } catch {
      // A restart that failed: decided again below from the kernel's state.
    }
    this.pending = undefined;
    await this.prepare();
    const ready = await loadEngine(this.kernel, this.label, this.request.project).catch((error) => {
      throw error instanceof ReplError ? error : serverFailure(this.server, "loading the engine", error);
    });
    this.ready = ready;
    this.next = "use";
    return new KernelWorker(this.kernel, ready, this);
  }

  /** A kernel of its own for one fresh file run, shut down when the run's worker stops. */
  async freshLife(): Promise<KernelWorker> {
    const request = { ...this.request, kernelId: undefined };
    const seat = await KernelSeat.open(request);
    seat.closeAfterLife = true;
    return seat.prepared as KernelWorker;
  }

  private closeAfterLife = false;

  ended(_worker: KernelWorker, how: LifeEnd): Promise<void> | undefined {
    if (this.closeAfterLife) return this.close();
    if (how === "killed") {
      // The cell may still be running: restart now rather than when the next run comes.
      this.next = "reload";
      this.pending = this.restart();
      // Awaited (and reported) by the next start or the close; until then it must not count as unhandled.
      this.pending.catch(() => {});
      return undefined;
    }
    this.next = ({ stopped: "restart", restarted: "reload", gone: "replace" } as const)[how];
    return undefined;
  }

  /** Set while the session is kept: told of each kernel it owns, which the record of started kernels no longer lists. */
  private keeper: ((kernelId: string) => void) | undefined;

  /**
   * The session is kept (docs/kernels.md): its kernel outlives this server, so it leaves the record of
   * started kernels (whose leftovers the next server shuts down) for the kept session's own record,
   * which `onKernel` keeps up to date when the kernel is replaced.
   */
  keep(onKernel: (kernelId: string) => void): void {
    this.keeper = onKernel;
    this.request.owned.remove(this.kernel.id);
    onKernel(this.kernel.id);
  }

  /** The server is going and the session is kept: only the connection closes; the kernel runs on. */
  async park(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.prepared = undefined;
    await this.pending?.catch(() => {});
    this.kernel.detach();
  }

  /** Shuts an owned kernel down (DELETE) or leaves an attached one running; the connection closes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.prepared = undefined;
    await this.pending?.catch(() => {});
    await release(this.request, this.kernel, this.owned);
  }

  private async prepare(): Promise<void> {
    const { server } = this.request;
    if (this.next === "restart") await this.restart();
    if (this.next === "replace") {
      if (!this.owned) {
        throw new ReplError(
          "KERNEL_NOT_FOUND",
          `The kernel this session attached to (${this.label}) is gone; open a new session`,
        );
      }
      this.request.owned.remove(this.kernel.id);
      this.kernel.detach();
      try {
        this.kernel = await this.request.link.start(this.request.kernel);
      } catch (error) {
        throw serverFailure(server, "starting a kernel", error);
      }
      if (this.keeper) this.keeper(this.kernel.id);
      else this.request.owned.add(server, this.kernel.id);
      return;
    }
    // After a restart (ours or the server's) the next life talks over a connection of its own, with a
    // new client id and so new channels on the Jupyter server: once, in a full test run, a cell's
    // requests on stdin went unanswered right after a restart over the connection that had seen it.
    const id = this.kernel.id;
    this.kernel.detach();
    this.kernel = await attach(this.request, id);
  }

  /** Restarts the kernel when this seat may; else the namespace stays as the person left it. */
  private async restart(): Promise<void> {
    if (!this.owned && !this.server.allowReset) return;
    try {
      await withTimeout(this.kernel.restart(), KERNEL_RESTART_TIMEOUT_MS, () => {
        throw new Error("the restart did not finish in time");
      });
    } catch (error) {
      // A kernel that vanished is replaced; anything else is the server's failure to report.
      const model = await this.request.link.running(this.kernel.id).catch(() => undefined);
      if (!model) {
        this.next = "replace";
        return;
      }
      throw serverFailure(this.server, "restarting the kernel", error);
    }
  }
}

function labelOf(server: KernelServer, kernel: KernelLink): string {
  return `kernel ${kernel.id} on "${server.name}"`;
}

/** The kernelspec must exist and be Python before a kernel of it is started. */
async function checkSpec(request: SeatRequest): Promise<void> {
  const { server, link } = request;
  let specs: Awaited<ReturnType<JupyterLink["specs"]>>;
  try {
    specs = await link.specs();
  } catch (error) {
    throw serverFailure(server, "listing its kernelspecs", error);
  }
  const name = request.kernel ?? server.kernel ?? specs.default;
  const spec = specs.specs[name];
  if (!spec) {
    throw new ReplError(
      "KERNEL_SERVER_FAILED",
      `Kernel server "${server.name}" offers no kernelspec "${name}"; it offers: ${Object.keys(specs.specs).join(", ")}`,
    );
  }
  if (spec.language.toLowerCase() !== "python") {
    throw new ReplError(
      "PYTHON_UNSUPPORTED",
      `Kernelspec "${name}" on "${server.name}" is ${spec.language || "of an unknown language"}, not Python; choose a Python kernelspec`,
    );
  }
  request.kernel = name;
}

async function attach(request: SeatRequest, id: string): Promise<KernelLink> {
  const { server, link } = request;
  let model: Awaited<ReturnType<JupyterLink["running"]>>;
  try {
    model = await link.running(id);
  } catch (error) {
    throw serverFailure(server, `looking up kernel ${id}`, error);
  }
  if (!model) {
    throw new ReplError(
      "KERNEL_NOT_FOUND",
      `No kernel ${id} runs on "${server.name}"; list the running kernels in JupyterLab (or GET api/kernels) and pass one of their ids`,
    );
  }
  return link.connect(model);
}

/** Lets go of a kernel: DELETE if ours (and forget it), else only our connection. */
async function release(request: SeatRequest, kernel: KernelLink, owned: boolean): Promise<void> {
  kernel.detach();
  if (!owned) return;
  try {
    await request.link.shutdown(kernel.id);
    request.owned.remove(kernel.id);
  } catch (error) {
    log.warn(
      `shutting down ${labelOf(request.server, kernel)} failed: ${serverFailure(request.server, "shutting down a kernel", error).message}`,
    );
  }
}
