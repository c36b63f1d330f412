// All sessions of this process, whichever MCP client opened them: the process-wide limits (sessions,
// concurrent opens, the artifact store) and the brokers live here. Clients see sessions only through their
// own SessionScope (scope.ts), which owns their default session and routes their session_ids.
import { realpathSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { ArtifactStore } from "../artifacts/store.ts";
import { Broker } from "../broker/broker.ts";
import { Journal, type JournalView } from "../broker/journal.ts";
import type { Scope } from "../broker/registry.ts";
import { ReplError } from "../errors.ts";
import { childEnv } from "../guardian/env.ts";
import type { KernelServer } from "../kernels/config.ts";
import type { JupyterLink } from "../kernels/jupyter.ts";
import type { OwnedKernels } from "../kernels/owned.ts";
import {
  KEEP_MAX_DEFAULT_SECONDS,
  SESSION_CLOSE_WAIT_MS,
  SESSION_OPENS_MAX,
  SESSIONS_MAX,
  SHUTDOWN_RUNS_WAIT_MS,
} from "../limits.ts";
import type { Sandbox } from "../sandbox/sandbox.ts";
import type { RunWatcher } from "../worker/supervisor.ts";
import { type Interpreter, selectSessionInterpreter } from "./interpreter.ts";
import { Keeping, type KeepOptions } from "./keeping.ts";
import { collectExpiredKernels, keepKernelSession, kernelSeat, prepareKernelKeep } from "./kernel-keeping.ts";
import { probeInterpreter } from "./probe.ts";
import { type ConnectionRecord, Session } from "./session.ts";

export const SESSION_NOT_FOUND = "Session not found or closed; open a new session";
export const SESSION_GONE = "Session not found or already closed";

export interface SessionsOptions {
  project: string;
  interpreter: Interpreter;
  maxMemoryMib: number;
  /** How long a question to the person waits (--approval-timeout-s). */
  approvalTimeoutMs: number;
  /** An explicit --config registry (absolute) shared by all sessions; else each project's .mcp.json. */
  configPath: string | undefined;
  scopes: Set<Scope>;
  /** The durable journal of --journal; else an in-memory one is made. */
  journal?: Journal;
  /** The kernel servers of --kernels (python_health shows them; sessions may open on them). */
  kernelServers?: KernelServer[];
  /** --sandbox: every local worker starts contained (docs/sandbox.md). */
  sandbox?: Sandbox;
  /** --keep-sessions and --keep-sessions-max (and the sandbox's hooks); default: nothing kept. */
  keep?: KeepOptions;
}

/** Where python_session_open puts a session on a kernel server. */
export interface KernelChoice {
  server: string;
  /** A kernelspec (else the entry's, else the server's default). */
  kernel?: string;
  /** A running kernel to attach to. */
  kernelId?: string;
}

/** Someone watching every session of the process (the viewer); see Sessions.watch. */
export interface SessionsWatcher {
  opened(session: Session): void;
  closed(session: Session): void;
  /** Its runs: set as the session's supervisor watcher. */
  runs(session: Session): RunWatcher;
}

export class Sessions {
  readonly serverId = crypto.randomUUID();
  private readonly byId = new Map<string, Session>();
  private opening = 0;
  readonly journal: Journal;
  /** One store for the whole server: its bounds are server-wide, each artifact belongs to a session. */
  readonly artifacts = new ArtifactStore();
  /** One broker per canonical project (one in all with an explicit --config), with its session count. */
  private readonly brokers = new Map<string, { broker: Broker; sessions: number }>();
  private watcher: SessionsWatcher | undefined;
  /** The viewer's address, when one is serving (python_health shows it). */
  viewerUrl: string | undefined;
  /** One client per kernel server, made on first use; the kernels this server started. */
  private readonly links = new Map<string, JupyterLink>();
  private ownedKernels: OwnedKernels | undefined;
  /** Kept sessions: claims, adoption, the launch of kept workers. */
  readonly keeping: Keeping;

  constructor(private readonly options: SessionsOptions) {
    this.journal = options.journal ?? new Journal();
    this.keeping = new Keeping(options.keep ?? { defaultSeconds: 0, maxSeconds: KEEP_MAX_DEFAULT_SECONDS });
    // The launch project's broker exists from the start: health reports it before any session uses it.
    this.brokers.set(this.brokerKey(options.project), {
      broker: this.newBroker(options.project),
      sessions: 0,
    });
  }

  /**
   * A new default session: the launch project with the server's interpreter. It counts toward the limit.
   * `journal` is what its cells may list of the journal (their client's records, see SessionScope).
   */
  openDefault(journal: JournalView): Session {
    if (this.byId.size >= SESSIONS_MAX) {
      throw new ReplError("SESSION_LIMIT", `Session limit reached (${SESSIONS_MAX}); close unused sessions`);
    }
    const session = new Session({
      ...this.common("default", journal),
      broker: this.attachBroker(this.options.project),
      project: this.options.project,
      python: this.options.interpreter.path,
      source: "server_default",
      problem: this.options.interpreter.problem,
    });
    this.publish(session);
    session.supervisor.waitFor(this.keeping.keepDefault(session));
    return session;
  }

  /** Settles once the default session's keeping (an adoption) is done: before serving, health is exact. */
  async keptReady(session: Session): Promise<void> {
    await session.supervisor.settledPending();
  }

  get(sessionId: string): Session | undefined {
    return this.byId.get(sessionId);
  }

  /** The kernel servers configured with --kernels (none without it). */
  get kernelServers(): readonly KernelServer[] {
    return this.options.kernelServers ?? [];
  }

  /**
   * Sorted by name, then id, in code-point order: the same on every machine, and no locale collator
   * (ICU's collation pages in about 2 MiB of memory the first time it runs).
   */
  list(): Session[] {
    return [...this.byId.values()].sort((a, b) => byCodePoint(a.name, b.name) || byCodePoint(a.id, b.id));
  }

  /** Validates, selects and probes, then publishes. Nothing is registered if any step fails. */
  async open(
    name: string,
    projectPath: string,
    python: string | undefined,
    journal: JournalView,
    signal?: AbortSignal,
    /** keep, in seconds (undefined: --keep-sessions, or what a parked worker was kept for). */
    keepSeconds?: number,
  ): Promise<Session> {
    return await this.opened(async () => {
      const project = canonicalProject(resolve(this.options.project, projectPath));
      const selected = selectSessionInterpreter(python, project, this.options.interpreter);
      const id = crypto.randomUUID();
      const outcome = await this.keeping.prepare({
        project,
        name,
        sessionId: id,
        seconds: keepSeconds,
        ...(python === undefined ? {} : { interpreter: selected.path }),
      });
      try {
        // An adopted worker is running its interpreter already: nothing to check.
        const probe = outcome.worker
          ? undefined
          : await probeInterpreter(selected.path, project, childEnv(), signal);
        this.checkPublishable(signal);
        const session = new Session({
          ...this.common(name, journal),
          id,
          broker: this.attachBroker(project),
          project,
          python: selected.path,
          source: selected.source,
          probe,
        });
        this.keeping.apply(session, outcome);
        return session;
      } catch (error) {
        await outcome.worker?.park();
        outcome.claim?.release();
        throw error;
      }
    });
  }

  /**
   * A session on a kernel server's kernel: started (or attached to) and the engine loaded before it is
   * published; nothing is registered, and a kernel started for it is shut down, if any step fails.
   * `project` is a directory on the kernel's host. Its cells' mcp calls go through the launch project's
   * broker (the registry is this server's, never the kernel's).
   */
  async openOnKernel(
    name: string,
    project: string | undefined,
    choice: KernelChoice,
    journal: JournalView,
    signal?: AbortSignal,
    keepSeconds?: number,
  ): Promise<Session> {
    const server = this.kernelServers.find((candidate) => candidate.name === choice.server);
    if (!server) {
      const names = this.kernelServers.map((candidate) => candidate.name);
      throw new ReplError(
        "KERNEL_SERVER_UNKNOWN",
        names.length > 0
          ? `No kernel server "${choice.server}" is configured; configured: ${names.join(", ")}`
          : `No kernel server "${choice.server}" is configured; the user configures them with --kernels FILE (docs/kernels.md)`,
      );
    }
    if (choice.kernelId !== undefined && (keepSeconds ?? 0) > 0) {
      throw new ReplError(
        "INVALID_ARGUMENT",
        "keep applies to a kernel the session starts; a kernel it attaches to (kernel_id) is left running anyway",
      );
    }
    return await this.opened(async () => {
      const id = crypto.randomUUID();
      const kept =
        choice.kernelId === undefined
          ? await prepareKernelKeep(this.keeping, {
              server,
              project,
              name,
              sessionId: id,
              seconds: keepSeconds,
            })
          : undefined;
      try {
        const seat = await kernelSeat(
          {
            server,
            link: await this.linkTo(server),
            owned: await this.owned(),
            kernel: choice.kernel,
            kernelId: choice.kernelId,
            project,
          },
          kept,
        );
        try {
          this.checkPublishable(signal);
        } catch (error) {
          await seat.close();
          throw error;
        }
        const session = new Session({
          ...this.common(name, journal),
          id,
          broker: this.attachBroker(this.options.project),
          project: seat.ready.cwd,
          python: seat.ready.python_executable,
          source: "kernel_server",
          kernel: { seat, localProject: this.options.project },
        });
        if (kept) await keepKernelSession(session, seat, kept);
        return session;
      } catch (error) {
        kept?.claim?.release();
        throw error;
      }
    });
  }

  /** Opens within the limits: at most SESSION_OPENS_MAX at once; publishes what `open` made. */
  private async opened(open: () => Promise<Session>): Promise<Session> {
    this.checkCapacity();
    this.opening++;
    try {
      const session = await open();
      this.publish(session);
      return session;
    } finally {
      this.opening--;
    }
  }

  /** After the slow part of an open: a cancelled open or a full server publishes nothing. */
  private checkPublishable(signal: AbortSignal | undefined): void {
    if (signal?.aborted) throw new ReplError("CANCELLED", "Session opening cancelled before publication");
    if (this.byId.size >= SESSIONS_MAX) {
      throw new ReplError("SESSION_LIMIT", `Session limit reached (${SESSIONS_MAX}); close unused sessions`);
    }
  }

  /** What every session of this server shares. */
  private common(name: string, journal: JournalView) {
    return {
      name,
      journal,
      artifacts: this.artifacts,
      serverId: this.serverId,
      maxMemoryMib: this.options.maxMemoryMib,
      approvalTimeoutMs: this.options.approvalTimeoutMs,
      sandbox: this.options.sandbox,
      recordConnection: async ({ allowed, ...fields }: ConnectionRecord) => {
        this.journal.connection(fields, allowed);
        // Best effort: the record is final, and a journal file that cannot be written changes no outcome.
        await this.journal.persisted().catch(() => {});
      },
    };
  }

  /**
   * Shuts down the kernels earlier servers started and left when they died (kill -9): those on the
   * servers this one is configured for. Returns how many.
   */
  async collectOrphanKernels(): Promise<number> {
    if (this.kernelServers.length === 0) return 0;
    const owned = await this.owned();
    const shutdown = async (server: KernelServer, id: string) => {
      await (await this.linkTo(server)).shutdown(id);
    };
    const orphans = await owned.collectOrphans(this.kernelServers, shutdown);
    return orphans + (await collectExpiredKernels(this.kernelServers, shutdown));
  }

  private async linkTo(server: KernelServer): Promise<JupyterLink> {
    let link = this.links.get(server.name);
    if (!link) {
      // Loaded on first use: a server without kernel sessions never pages in the Jupyter client.
      const { JupyterLink } = await import("../kernels/jupyter.ts");
      link = new JupyterLink(server);
      this.links.set(server.name, link);
    }
    return link;
  }

  private async owned(): Promise<OwnedKernels> {
    if (!this.ownedKernels) {
      const { OwnedKernels } = await import("../kernels/owned.ts");
      this.ownedKernels = new OwnedKernels();
    }
    return this.ownedKernels;
  }

  private checkCapacity(): void {
    if (this.opening >= SESSION_OPENS_MAX) {
      throw new ReplError(
        "SESSION_LIMIT",
        "Session opening capacity exhausted; wait for active interpreter probes",
      );
    }
    if (this.byId.size >= SESSIONS_MAX) {
      throw new ReplError("SESSION_LIMIT", `Session limit reached (${SESSIONS_MAX}); close unused sessions`);
    }
  }

  /** Stops the session's run and worker and forgets it. */
  async close(sessionId: string): Promise<Session> {
    const session = this.byId.get(sessionId);
    if (!session) throw new ReplError("SESSION_NOT_FOUND", SESSION_GONE);
    this.byId.delete(sessionId);
    session.markClosed();
    this.watcher?.closed(session);
    this.artifacts.deleteForSession(session.id);
    await session.supervisor.shutdown(SESSION_CLOSE_WAIT_MS);
    session.keep?.ended?.();
    session.releaseKeep();
    await session.kernel?.close();
    await this.detachBroker(session.kernel ? this.options.project : session.project);
    return session;
  }

  /**
   * Tells `watcher` of every session, the existing ones first, and of their runs from now on. One watcher
   * per process; without one, sessions and runs pay nothing for the possibility.
   */
  watch(watcher: SessionsWatcher): void {
    this.watcher = watcher;
    for (const session of this.byId.values()) {
      session.supervisor.watcher = watcher.runs(session);
      watcher.opened(session);
    }
  }

  private publish(session: Session): void {
    this.byId.set(session.id, session);
    if (this.watcher) {
      session.supervisor.watcher = this.watcher.runs(session);
      this.watcher.opened(session);
    }
    // Adopted once watched, so a cell it was running is seen starting.
    session.takeHandover();
  }

  /** The default project's broker: health reports it. */
  get defaultBroker(): Broker {
    return (this.brokers.get(this.brokerKey(this.options.project)) as { broker: Broker }).broker;
  }

  async shutdown(): Promise<void> {
    await Promise.all(
      this.list().map(async (session) => {
        session.markClosed();
        // A kept session's worker is parked (a kernel left running), its cell (if any) going on; the
        // contract's shutdown is for the rest.
        if (session.kept) {
          await session.supervisor.letGo();
          await session.kernel?.park();
          session.keep?.parked?.();
        } else {
          await session.supervisor.shutdown(SHUTDOWN_RUNS_WAIT_MS).then(() => session.kernel?.close());
        }
        session.releaseKeep();
      }),
    );
    for (const link of this.links.values()) link.dispose();
    await this.artifacts.close();
    await Promise.all([...this.brokers.values()].map(({ broker }) => broker.close()));
  }

  private newBroker(project: string): Broker {
    return new Broker(
      { project, configPath: this.options.configPath, scopes: this.options.scopes, env: process.env },
      this.journal,
    );
  }

  private brokerKey(project: string): string {
    return this.options.configPath === undefined ? project : "";
  }

  private attachBroker(project: string): Broker {
    const key = this.brokerKey(project);
    let held = this.brokers.get(key);
    if (!held) {
      held = { broker: this.newBroker(project), sessions: 0 };
      this.brokers.set(key, held);
    }
    held.sessions++;
    return held.broker;
  }

  /** The last session of a project closing shuts its broker (the default project's lives on). */
  private async detachBroker(project: string): Promise<void> {
    const key = this.brokerKey(project);
    const held = this.brokers.get(key);
    if (!held) return;
    held.sessions--;
    if (held.sessions > 0 || key === this.brokerKey(this.options.project)) return;
    this.brokers.delete(key);
    await held.broker.close();
  }
}

function canonicalProject(path: string): string {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    throw new ReplError("PROJECT_INVALID", "Project directory does not exist");
  }
  if (!statSync(real).isDirectory()) throw new ReplError("PROJECT_INVALID", "Project must be a directory");
  return real;
}

function byCodePoint(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
