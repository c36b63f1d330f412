// A session: a named namespace bound to a project directory and an interpreter, with its own worker,
// run history and generation.
import { realpathSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import type { ArtifactStore } from "../artifacts/store.ts";
import type { Broker } from "../broker/broker.ts";
import type { JournalApproval, JournalView } from "../broker/journal.ts";
import { ReplError } from "../errors.ts";
import { childEnv } from "../guardian/env.ts";
import type { KernelSeat } from "../kernels/seat.ts";
import { SANDBOX_DENIALS_MAX } from "../limits.ts";
import type { Claim } from "../parking/claim.ts";
import { Questions } from "../person/questions.ts";
import type { Destination, Verdict as SandboxVerdict } from "../sandbox/decisions.ts";
import { ContainedRecord } from "../sandbox/record.ts";
import type { Sandbox, SandboxView, SessionContainment } from "../sandbox/sandbox.ts";
import type { Handover, WorkerChannel } from "../worker/channel.ts";
import type { SandboxDenial } from "../worker/frames.ts";
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
  /** --sandbox: a local session's workers start contained (kernel sessions are not: docs/sandbox.md). */
  sandbox?: Sandbox;
  /** Where the person's decisions on contained cells' connections are recorded (durably, with --journal). */
  recordConnection?: (fields: ConnectionRecord) => Promise<void>;
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
  /** The sandbox's policy as tools show it; undefined when the session is not contained. */
  readonly sandbox: SandboxView | undefined;
  /** How its workers are contained, when they are. */
  private readonly containment: SessionContainment | undefined;
  /** What the network refused each contained run, until its result takes it. */
  private readonly refusals = new Map<string, SandboxDenial[]>();
  /** Questions of connections made while no cell runs (a thread left running): the viewer may answer. */
  private readonly idleQuestions = new Questions();
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
    const contained = this.contained(options);
    this.sandbox = contained?.view;
    this.containment = contained?.containment;
    this.artifacts = new SessionArtifacts(
      store,
      options.broker,
      this.id,
      toolPaths,
      this.lifetime.signal,
      contained && {
        rules: contained.containment.rules,
        refused: (denial: SandboxDenial) => this.noteDenial(denial),
      },
    );
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
      takeDenials: (runId) => {
        const refused = this.refusals.get(runId) ?? [];
        this.refusals.delete(runId);
        return refused;
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
        ...(contained ? { contain: contained.containment.contain } : {}),
      },
    });
  }

  /**
   * Hands a kept worker taken over for this session to its supervisor. One that was contained (its record
   * says so; the adoption rule lets only such a one reach a contained session) has its network served
   * again, until it is gone.
   */
  takeHandover(): void {
    const handover = this.handover;
    if (!handover) return;
    this.handover = undefined;
    const record = v.safeParse(ContainedRecord, handover.info.containment);
    if (this.containment && record.success) {
      const release = this.containment.adopt(record.output);
      handover.info.whenGone?.(release);
    }
    this.supervisor.adopt(handover.worker, handover.info);
  }

  /** How this session's workers start contained, when the server contains (not on a kernel). */
  private contained(options: SessionOptions) {
    const sandbox = options.sandbox;
    if (!sandbox || options.kernel) return undefined;
    const environment = projectEnvironment(options.project, options.source);
    const broker = options.broker;
    const places = {
      project: options.project,
      environment,
      secretsNow: () => brokerSecrets(broker, options.project),
      ask: (destination: Destination) => this.askConnection(destination, options),
      refused: (destination: Destination, reason: string) => this.refused(destination, reason),
    };
    return { containment: sandbox.forSession(places), view: sandbox.view(places) };
  }

  private async askConnection(destination: Destination, options: SessionOptions): Promise<SandboxVerdict> {
    const run = this.supervisor.active;
    const target = { host: destination.host, port: destination.port };
    const verdict = await this.asking.connection(
      run?.questions ?? this.idleQuestions,
      run?.id ?? null,
      target,
      run?.signal,
    );
    const allowed = verdict.decision === "allow_once" || verdict.decision === "allow_session";
    await options.recordConnection?.({
      session_id: this.id,
      project: this.project,
      run_id: run?.id ?? null,
      ...target,
      approval: { ...verdict, decided_ms: Date.now() },
      allowed,
    });
    if (verdict.decision === "allow_once" || verdict.decision === "allow_session") return verdict.decision;
    return { deny: CONNECTION_REFUSALS[verdict.decision](target) };
  }

  private refused(destination: Destination, reason: string): void {
    this.noteDenial({ kind: "network", target: `${destination.host}:${destination.port}`, reason });
  }

  /** Kept for the running cell's result (sandbox_denials), at most SANDBOX_DENIALS_MAX, each once. */
  private noteDenial(denial: SandboxDenial): void {
    const runId = this.supervisor.active?.id;
    if (!runId) return;
    const refused = this.refusals.get(runId) ?? [];
    if (refused.length >= SANDBOX_DENIALS_MAX || refused.some((seen) => seen.target === denial.target))
      return;
    refused.push(denial);
    this.refusals.set(runId, refused);
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

/** A contained cell's connection the person was asked about, as the journal keeps it. */
export interface ConnectionRecord {
  session_id: string;
  project: string;
  run_id: string | null;
  host: string;
  port: number;
  approval: JournalApproval;
  allowed: boolean;
}

/** Why a connection nobody allowed was refused, as the cell sees it (the proxy's 403 reason). */
const CONNECTION_REFUSALS: Record<
  "deny" | "no_channel" | "timed_out" | "cancelled",
  (target: { host: string; port: number }) => string
> = {
  deny: ({ host, port }) => `the person denied ${host}:${port}`,
  no_channel: ({ host, port }) =>
    `${host}:${port} is not in the sandbox policy and nobody could be asked (no MCP elicitation, no viewer page); allow it in the policy file`,
  timed_out: ({ host, port }) => `nobody answered whether ${host}:${port} may be reached in time`,
  cancelled: ({ host, port }) => `the question about ${host}:${port} ended with its run`,
};

/** The interpreter's environment when it is the project's own .venv and lies outside it (a link). */
function projectEnvironment(project: string, source: EnvironmentSource): string | undefined {
  if (source !== "project_venv") return undefined;
  try {
    const real = realpathSync(join(project, ".venv"));
    return real === join(project, ".venv") ? undefined : real;
  } catch {
    return undefined;
  }
}

/** What the session's broker keeps secret now: credential values (no worker inherits them) and files. */
function brokerSecrets(broker: Broker, project: string): { values: string[]; files: string[] } {
  const values: string[] = [];
  const files = [join(project, ".mcp.json")];
  try {
    for (const entry of broker.serverEntries()) {
      values.push(...entry.secrets);
      const transport = entry.transport as { oauth?: { credentialFile?: string } };
      if (transport.oauth?.credentialFile) files.push(transport.oauth.credentialFile);
    }
  } catch {
    // A registry that does not load has no entries to keep secret.
  }
  return { values, files };
}
