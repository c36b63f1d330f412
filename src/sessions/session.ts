// A session: a named namespace bound to a project directory and an interpreter, with its own worker,
// run history and generation.
import type { ArtifactStore } from "../artifacts/store.ts";
import type { Broker } from "../broker/broker.ts";
import type { JournalView } from "../broker/journal.ts";
import { ReplError } from "../errors.ts";
import { childEnv } from "../guardian/env.ts";
import type { KernelSeat } from "../kernels/seat.ts";
import type { Claim } from "../parking/claim.ts";
import type { Handover, WorkerChannel } from "../worker/channel.ts";
import type { KeepLaunch } from "../worker/process.ts";
import { Supervisor } from "../worker/supervisor.ts";
import { SessionArtifacts } from "./artifacts.ts";
import { SessionAsking } from "./asking.ts";
import { brokerBridge } from "./bridge.ts";
import type { EnvironmentSource } from "./interpreter.ts";
import type { ProbeResult } from "./probe.ts";

/** A kept session's keeping (docs/sessions.md, "Keeping a session"). */
export interface SessionKeep {
  /** How long its worker outlives this server, in seconds. */
  seconds: number;
  /** This server's claim on the session's name and project. */
  claim: Claim;
  /** How its workers are started kept (undefined while `seconds` is 0: an adopted session not kept again). */
  launch: () => KeepLaunch | undefined;
  /** A kernel session: the server is going and its kernel is left running (its record says so). */
  parked?: () => void;
  /** A kernel session closed for good: its record goes. */
  ended?: () => void;
}

/** A worker kept under this session's name that could not come back. */
export interface Lost {
  reason: string;
  /** The session's count goes on from it, so an expected_generation of before is refused. */
  generation: number;
}

/** What happened to a worker an earlier server parked under this session's name. */
export interface Arrival {
  /** The worker was taken over: since when it had been parked (ms since the epoch; null: never held). */
  adopted?: { parkedSince: number | null };
  /** It could not come back, and why: the session starts afresh. */
  lost?: Lost;
}

export interface SessionOptions {
  /** Given when the id had to be known before the session (a kept session's claim names it). */
  id?: string;
  serverId: string;
  name: string;
  project: string;
  python: string;
  source: EnvironmentSource;
  /** Set when the interpreter was checked before the session was published. */
  probe?: ProbeResult;
  /** A reason no worker can start (the server default interpreter is missing). */
  problem?: string;
  maxMemoryMib: number;
  /** How long a question to the person waits (--approval-timeout-s). */
  approvalTimeoutMs: number;
  /**
   * Set for a session on a Jupyter kernel: its cells run there, `project` is a directory on the kernel's
   * host, and the tools' own paths (artifact import and save) stay this server's (`localProject`).
   */
  kernel?: { seat: KernelSeat; localProject: string };
  /** The broker of the session's project (or of the explicit --config). */
  broker: Broker;
  /** What this session's cells may list of the journal: the records of its own client. */
  journal: JournalView;
  artifacts: ArtifactStore;
}

export class Session {
  readonly id: string;
  readonly serverId: string;
  readonly name: string;
  readonly project: string;
  readonly python: string;
  readonly source: EnvironmentSource;
  readonly probe: ProbeResult | undefined;
  readonly problem: string | undefined;
  readonly supervisor: Supervisor;
  readonly artifacts: SessionArtifacts;
  readonly asking: SessionAsking;
  /** The kernel a kernel session runs on; undefined for a local worker. */
  readonly kernel: KernelSeat | undefined;
  private readonly lifetime = new AbortController();
  /** Set while the session is kept: its worker outlives this server. */
  keep: SessionKeep | undefined;
  /** Set when the session met a worker an earlier server parked under its name. */
  arrival: Arrival | undefined;
  /** A kept worker taken over for this session, handed to its supervisor when it is published. */
  handover: { worker: WorkerChannel; info: Handover } | undefined;

  constructor(options: SessionOptions) {
    this.id = options.id ?? crypto.randomUUID();
    this.serverId = options.serverId;
    this.name = options.name;
    this.project = options.project;
    this.python = options.python;
    this.source = options.source;
    this.probe = options.probe;
    this.problem = options.problem;
    const store = options.artifacts;
    const seat = options.kernel?.seat;
    this.kernel = seat;
    this.asking = new SessionAsking(this.id, options.approvalTimeoutMs);
    const toolPaths = options.kernel?.localProject ?? this.project;
    this.artifacts = new SessionArtifacts(store, options.broker, this.id, toolPaths, this.lifetime.signal);
    this.supervisor = new Supervisor({
      serverId: options.serverId,
      sessionId: this.id,
      maxMemoryMib: options.maxMemoryMib,
      bridge: brokerBridge(options.broker, options.journal, this.id, this.artifacts, this.asking, (runId) =>
        this.supervisor.active?.id === runId ? this.supervisor.active.questions : undefined,
      ),
      onRunEnd: (runId) => store.uploads.abortRun(this.id, runId),
      keepDisplay: async (bytes, format) => {
        const reference = await store.createFromBytes(this.id, bytes, format);
        // A session closed meanwhile has had its artifacts deleted: this one must not outlive them.
        if (this.closed) {
          store.delete(this.id, reference.id);
          throw new ReplError("SESSION_CLOSED", "Session is closed");
        }
        return reference;
      },
      dropDisplay: (artifactId) => {
        try {
          store.delete(this.id, artifactId);
        } catch {
          // Already gone: evicted by the store's own bounds, or deleted by the agent.
        }
      },
      ...(seat
        ? {
            startWorker: (_launch, purpose) =>
              purpose === "fresh" ? seat.freshLife() : seat.startLife(purpose),
            resetRefusal: () => seat.resetRefusal(),
          }
        : { keep: () => this.keep?.launch() }),
      launch: {
        python: options.python,
        problem: options.problem,
        cwd: options.project,
        env: childEnv(),
      },
    });
  }

  get closed(): boolean {
    return this.lifetime.signal.aborted;
  }

  /** Marks the session closed: its forwards in flight are cancelled. */
  markClosed(): void {
    this.lifetime.abort();
  }

  /** Whether its worker outlives this server (parked when the server goes). */
  get kept(): boolean {
    return (this.keep?.seconds ?? 0) > 0;
  }

  /** Gives up the claim on its name (the session is closed, or the server is going). */
  releaseKeep(): void {
    this.keep?.claim.release();
  }

  get runtimeStatus(): "lazy" | "running" | "stopped" | "closed" {
    if (this.closed) return "closed";
    if (this.supervisor.running) return "running";
    return this.supervisor.generation === 0 ? "lazy" : "stopped";
  }
}
