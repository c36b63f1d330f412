// What one MCP client sees: its own default session and the sessions it opened, and the journal records
// of those, nothing else. Over stdio there is one scope for the life of the process; over HTTP each
// legacy MCP session has one, ended with it, and each 2026-07-28 principal (a bearer token) has one
// (server/http/principals.ts). Another scope's session ids get exactly the answers an unknown id gets.
import type { ArtifactStore } from "../artifacts/store.ts";
import type { Broker } from "../broker/broker.ts";
import type { JournalView } from "../broker/journal.ts";
import { ProtocolError, ReplError } from "../errors.ts";
import { type KernelChoice, SESSION_GONE, SESSION_NOT_FOUND, type Sessions } from "./registry.ts";
import type { Session } from "./session.ts";

export class SessionScope {
  readonly default: Session;
  private readonly owned = new Set<string>();
  /**
   * Its open sessions, and the closed ones whose journal records it may still list. A closed session is
   * forgotten once the bounded journal holds nothing of it, so this stays within SESSIONS_MAX plus
   * JOURNAL_MAX_RECORDS for the life of a stdio server, however many sessions it opens.
   */
  private readonly known = new Set<string>();
  /**
   * The server's journal holds every client's calls; this client's cells list only its own. Records a
   * previous server left (--journal after a crash) belong to no session of this process: a stdio client,
   * the only one its server has, sees them too; an HTTP client does not (`repl-mcp doctor` and the file do).
   */
  private readonly journal: JournalView;
  private ended = false;

  /** Throws SESSION_LIMIT when the process already holds as many sessions as it may. */
  constructor(
    private readonly pool: Sessions,
    { earlierJournal = false }: { earlierJournal?: boolean } = {},
  ) {
    this.journal = { list: () => pool.journal.visibleTo((id) => this.known.has(id), earlierJournal) };
    this.default = pool.openDefault(this.journal);
    this.adopt(this.default.id);
  }

  private adopt(sessionId: string): void {
    this.forgetClosed();
    this.owned.add(sessionId);
    this.known.add(sessionId);
  }

  private forgetClosed(): void {
    const recorded = this.pool.journal.sessionIds();
    for (const id of this.known) {
      if (!this.owned.has(id) && !recorded.has(id)) this.known.delete(id);
    }
  }

  /** How many session ids it still remembers (open ones, and closed ones with journal records left). */
  get knownSessions(): number {
    return this.known.size;
  }

  /** How many journal records this client sees. */
  get journalRecords(): number {
    return this.journal.list().length;
  }

  get serverId(): string {
    return this.pool.serverId;
  }

  get defaultBroker(): Broker {
    return this.pool.defaultBroker;
  }

  /** The process-wide store; its entries are owned by sessions, so reach them through `owns`. */
  get artifacts(): ArtifactStore {
    return this.pool.artifacts;
  }

  /** The kernel servers configured with --kernels. */
  get kernelServers() {
    return this.pool.kernelServers;
  }

  /** --keep-sessions-max: the longest keep a session may ask for. */
  get keepMaxSeconds(): number {
    return this.pool.keeping.options.maxSeconds;
  }

  /** The viewer's URL, when this server runs one. */
  get viewerUrl(): string | undefined {
    return this.pool.viewerUrl;
  }

  owns(sessionId: string): boolean {
    return this.owned.has(sessionId);
  }

  /** The session a routed tool addresses; omitted → this scope's default session. */
  route(sessionId: string | undefined): Session {
    if (sessionId === undefined) return this.default;
    const session = this.owned.has(sessionId) ? this.pool.get(sessionId) : undefined;
    if (!session) throw new ProtocolError(SESSION_NOT_FOUND);
    return session;
  }

  list(): Session[] {
    return this.pool.list().filter((session) => this.owned.has(session.id));
  }

  async open(
    name: string,
    project: string | undefined,
    python: string | undefined,
    kernel: KernelChoice | undefined,
    signal?: AbortSignal,
    /** keep, in seconds (undefined: the server's default). */
    keepSeconds?: number,
  ) {
    const session = kernel
      ? await this.pool.openOnKernel(name, project, kernel, this.journal, signal, keepSeconds)
      : await this.pool.open(name, project ?? ".", python, this.journal, signal, keepSeconds);
    if (this.ended) {
      // The client went away while the interpreter was being probed: nobody can reach this session.
      await this.pool.close(session.id);
      throw new ReplError("SESSION_CLOSED", "The MCP session ended while this session was opening");
    }
    this.adopt(session.id);
    return session;
  }

  async close(sessionId: string): Promise<Session> {
    if (!this.owned.has(sessionId)) throw new ReplError("SESSION_NOT_FOUND", SESSION_GONE);
    if (sessionId === this.default.id) {
      throw new ReplError(
        "DEFAULT_SESSION",
        "The default session cannot be closed; use execute_python with reset=true to clear it",
      );
    }
    this.owned.delete(sessionId);
    try {
      return await this.pool.close(sessionId);
    } finally {
      this.forgetClosed();
    }
  }

  /** True while any of this scope's sessions has a run in progress. */
  get busy(): boolean {
    return this.list().some((session) => session.supervisor.active !== undefined);
  }

  /** Nothing to lose: only the default session, which never started Python and holds no artifact. */
  get pristine(): boolean {
    const idle = this.default.supervisor.generation === 0 && !this.busy;
    return this.owned.size === 1 && idle && this.artifacts.list(this.default.id).length === 0;
  }

  /** Closes every session of the scope, the default one included: their workers stop. */
  async end(): Promise<void> {
    this.ended = true;
    const ids = [...this.owned];
    this.owned.clear();
    await Promise.all(ids.map((id) => this.pool.close(id).catch(() => undefined)));
  }
}
