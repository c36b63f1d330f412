// The viewer's watch on every session: it remembers what the history does not keep (each run's source
// and start time, the artifacts its cell made), and turns sessions and runs into events for the pages
// that are open. With no page open, a run costs a record and a listener; output is counted only while
// a page receives it, and it leaves in one event per run every VIEWER_OUTPUT_FLUSH_MS, cut at
// VIEWER_RUN_OUTPUT_MAX_CHARS per stream (the page is told how much it did not get).
import type { ArtifactReference } from "../artifacts/reference.ts";
import {
  HISTORY_RUNS,
  INVENTORY_TIMEOUT_SECONDS,
  VIEWER_OUTPUT_FLUSH_MS,
  VIEWER_RUN_OUTPUT_MAX_CHARS,
  VIEWER_SOURCE_MAX_BYTES,
} from "../limits.ts";
import { log } from "../log.ts";
import { type Asked, type Channel, decides, type Reply } from "../person/questions.ts";
import type { Sessions, SessionsWatcher } from "../sessions/registry.ts";
import type { Session } from "../sessions/session.ts";
import type { ExecutionResult } from "../worker/result.ts";
import type { ActiveRun } from "../worker/run.ts";
import type { RunWatcher } from "../worker/supervisor.ts";
import { encodeEvent, type PageStream } from "./stream.ts";
import {
  earlierRunView,
  finishedRunView,
  liveRunView,
  questionView,
  type RunRecord,
  type RunView,
  sessionView,
  sourceOf,
} from "./views.ts";

export class Hub implements SessionsWatcher {
  private readonly sessions = new Map<string, Session>();
  /** Per session, oldest first, at most as many as its history keeps. */
  private readonly records = new Map<string, RunRecord[]>();
  readonly pages = new Set<PageStream>();
  private readonly flushing = new Set<RunRecord>();
  private readonly dirtySessions = new Set<Session>();
  /** Runs to send at the next flush: live (undefined) or with their final result. */
  private readonly dirtyRuns = new Map<RunRecord, ExecutionResult | undefined>();
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private knownArtifacts = new Set<string>();
  /** Questions put to the person on the pages, by id, until answered or withdrawn. */
  private readonly asked = new Map<string, Asked>();
  /** An adopted session's runs from before the adoption, newest first (its worker retained them). */
  private readonly earlier = new Map<string, RunView[]>();
  /** Each session's viewer channel, taken back when it closes. */
  private readonly channels = new Map<string, Channel>();
  private readonly unsubscribe: () => void;

  constructor(private readonly pool: Sessions) {
    this.unsubscribe = pool.artifacts.onChange(() => this.artifactsChanged());
    for (const { reference } of pool.artifacts.list()) this.knownArtifacts.add(reference.id);
  }

  opened(session: Session): void {
    this.sessions.set(session.id, session);
    this.records.set(session.id, []);
    const channel = this.channel();
    this.channels.set(session.id, channel);
    session.asking.shared.add(channel);
    this.sessionChanged(session);
    this.adopted(session);
  }

  /** Once per adopted session (a default session adopts after it is opened): its earlier cells. */
  private adopted(session: Session): void {
    if (!session.arrival?.adopted || this.earlier.has(session.id) || !this.sessions.has(session.id)) return;
    this.earlier.set(session.id, []);
    void this.fetchEarlier(session);
  }

  /**
   * The cells an adopted session ran under its earlier server, as its worker retained them: asked for
   * once, between cells (a cell the adopted worker was running finishes first), never recorded as a run.
   */
  private async fetchEarlier(session: Session): Promise<void> {
    const adoptedAt = Date.now();
    for (let attempt = 0; attempt < 3 && !session.closed; attempt++) {
      await session.supervisor.active?.done.catch(() => undefined);
      const result = await session.supervisor.execute({
        task: { kind: "history" },
        timeoutSeconds: INVENTORY_TIMEOUT_SECONDS,
        reset: false,
        record: false,
      });
      if (result.error_code === "SESSION_BUSY") continue;
      if (!result.success || !result.history || !this.sessions.has(session.id)) return;
      const records = this.records.get(session.id) ?? [];
      const ours = new Set(records.map((record) => record.runId));
      // A cell the adopted worker was running is a run of ours now, but only the worker had its source.
      for (const record of records) {
        const source = result.history.find((run) => run.run_id === record.runId)?.source;
        const finished = session.supervisor.history.get(record.runId);
        if (record.source !== "" || source === undefined) continue;
        record.source = source;
        if (finished && this.pages.size > 0) {
          this.dirtyRuns.set(record, finished);
          this.schedule();
        }
      }
      const views = result.history
        .filter((run) => !ours.has(run.run_id) && !session.supervisor.history.get(run.run_id))
        .reverse()
        .map((run) => earlierRunView(session.id, run, adoptedAt));
      this.earlier.set(session.id, views);
      for (const view of views) this.broadcast({ type: "run", run: view });
      return;
    }
  }

  closed(session: Session): void {
    this.sessions.delete(session.id);
    this.records.delete(session.id);
    this.earlier.delete(session.id);
    const channel = this.channels.get(session.id);
    if (channel) session.asking.shared.delete(channel);
    this.channels.delete(session.id);
    this.broadcast({ type: "session_closed", session_id: session.id });
  }

  runs(session: Session): RunWatcher {
    return {
      started: (run) => this.started(session, run),
      changed: () => {
        this.sessionChanged(session);
        this.adopted(session);
      },
    };
  }

  /**
   * The pages as a channel to the person: it reaches them while at least one page is open (every page
   * shows the question; the first answer wins). A page opened later gets the questions the pages have in
   * its snapshot, and those asked while no page was open are offered when it opens (`attach`).
   */
  private channel(): Channel {
    return {
      name: "viewer",
      reaches: () => this.pages.size > 0,
      offer: (asked) => {
        this.asked.set(asked.id, asked);
        this.broadcast({
          type: "question",
          question: questionView(asked, this.sessions.get(asked.where.sessionId)),
        });
      },
      withdraw: (asked) => {
        if (this.asked.delete(asked.id)) this.broadcast({ type: "question_closed", id: asked.id });
      },
    };
  }

  /** An answer from a page; false when the question is no longer open (answered elsewhere, ended). */
  answer(id: string, reply: Reply): boolean {
    const asked = this.asked.get(id);
    if (!asked) return false;
    if ("decision" in reply !== decides(asked.question)) return false;
    return asked.answer("viewer", reply);
  }

  /** The process-wide artifact store (pictures and downloads are read from it). */
  get store() {
    return this.pool.artifacts;
  }

  session(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  /** A new page: output still waiting goes to the others first, so the snapshot does not repeat it. */
  attach(page: PageStream): void {
    this.flush();
    // Its snapshot carries the live output so far: the cap counts from there.
    for (const list of this.records.values()) {
      for (const record of list) {
        if (record.active) {
          const { stdout, stderr } = record.active.live;
          record.sent = {
            stdout: Math.max(record.sent.stdout, stdout.length),
            stderr: Math.max(record.sent.stderr, stderr.length),
          };
        }
      }
    }
    this.pages.add(page);
    page.send(encodeEvent(this.snapshot()));
    // A question asked while no page was open passed the pages by: the channel reaches someone now.
    for (const session of this.sessions.values()) {
      const channel = this.channels.get(session.id);
      if (channel) session.asking.offerWaiting(channel);
    }
  }

  detach(page: PageStream): void {
    this.pages.delete(page);
  }

  close(): void {
    this.unsubscribe();
    clearTimeout(this.flushTimer);
    for (const page of [...this.pages]) page.close();
  }

  private started(session: Session, run: ActiveRun): void {
    const record: RunRecord = {
      sessionId: session.id,
      runId: run.id,
      source: sourceOf(run.task, VIEWER_SOURCE_MAX_BYTES),
      startedAt: Date.now(),
      active: run,
      made: new Set(),
      sent: { stdout: 0, stderr: 0 },
      omitted: { stdout: 0, stderr: 0 },
      pending: { stdout: "", stderr: "" },
    };
    const list = this.records.get(session.id);
    if (!list) return;
    list.push(record);
    if (list.length > HISTORY_RUNS) list.shift();
    const onOutput = (stream: "stdout" | "stderr", text: string) => this.output(record, stream, text);
    run.outputListeners.add(onOutput);
    if (this.pages.size > 0) {
      this.dirtySessions.add(session);
      this.dirtyRuns.set(record, undefined);
      this.schedule();
    }
    void run.done.then(
      (result) => {
        run.outputListeners.delete(onOutput);
        record.active = undefined;
        this.ended(session, record, result);
      },
      (error) => log.debug("viewer: a run failed to settle:", error),
    );
  }

  private output(record: RunRecord, stream: "stdout" | "stderr", text: string): void {
    if (this.pages.size === 0) return;
    const room = VIEWER_RUN_OUTPUT_MAX_CHARS - record.sent[stream];
    const piece = room <= 0 ? "" : text.length <= room ? text : text.slice(0, room);
    record.sent[stream] += piece.length;
    record.pending[stream] += piece;
    record.omitted[stream] += text.length - piece.length;
    this.flushing.add(record);
    this.schedule();
  }

  private schedule(): void {
    this.flushTimer ??= setTimeout(() => this.flush(), VIEWER_OUTPUT_FLUSH_MS);
  }

  /**
   * Everything since the last flush leaves together, off the agent's path: sessions, then runs (a run
   * that started and ended meanwhile only as it ended), then output of the runs still going.
   */
  private flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const events: object[] = [];
    for (const session of this.dirtySessions) {
      if (this.sessions.has(session.id)) events.push({ type: "session", session: sessionView(session) });
    }
    this.dirtySessions.clear();
    for (const [record, result] of this.dirtyRuns) {
      const session = this.sessions.get(record.sessionId);
      if (!session) continue;
      const view = result
        ? this.finishedView(session, record, result)
        : record.active && liveRunView(record, record.active);
      if (view) events.push({ type: "run", run: view });
      // Its output so far is in the view.
      if (result || view) {
        this.flushing.delete(record);
        record.pending = { stdout: "", stderr: "" };
      }
    }
    this.dirtyRuns.clear();
    if (events.length) {
      const bytes = concat(events.map(encodeEvent));
      for (const page of this.pages) page.send(bytes);
    }
    for (const record of this.flushing) {
      const { stdout, stderr } = record.pending;
      record.pending = { stdout: "", stderr: "" };
      const event = encodeEvent({
        type: "output",
        session_id: record.sessionId,
        run_id: record.runId,
        stdout,
        stderr,
        omitted: record.omitted,
      });
      for (const page of this.pages) page.send(event, true);
    }
    this.flushing.clear();
  }

  private ended(session: Session, record: RunRecord, result: ExecutionResult): void {
    if (this.pages.size === 0) return;
    this.dirtySessions.add(session);
    this.dirtyRuns.set(record, result);
    this.schedule();
  }

  private finishedView(session: Session, record: RunRecord, result: ExecutionResult): RunView | undefined {
    // Pictures of older runs become artifacts while a newer run holds the slot: they are not its own.
    const others = new Set<string>();
    for (const other of this.records.get(session.id) ?? []) {
      if (other === record) continue;
      const earlier = session.supervisor.history.get(other.runId);
      for (const display of earlier?.displays ?? []) if (display.artifact) others.add(display.artifact.id);
    }
    const made: ArtifactReference[] = [];
    for (const id of record.made) {
      if (others.has(id)) continue;
      try {
        made.push(this.pool.artifacts.lookup(session.id, id));
      } catch {
        // Deleted or evicted since.
      }
    }
    return finishedRunView(record, result, made);
  }

  private sessionChanged(session: Session): void {
    if (this.pages.size === 0 || !this.sessions.has(session.id)) return;
    this.dirtySessions.add(session);
    this.schedule();
  }

  /** New artifacts belong to the run their session was running when they appeared. */
  private artifactsChanged(): void {
    const now = new Set<string>();
    for (const { owner, reference } of this.pool.artifacts.list()) {
      now.add(reference.id);
      if (this.knownArtifacts.has(reference.id)) continue;
      const list = this.records.get(owner);
      const current = list?.[list.length - 1];
      if (current?.active) current.made.add(reference.id);
    }
    this.knownArtifacts = now;
  }

  private snapshot() {
    const runs: RunView[] = [...this.earlier.values()].flat();
    for (const [id, list] of this.records) {
      const session = this.sessions.get(id) as Session;
      for (const record of list) {
        if (record.active) {
          runs.push(liveRunView(record, record.active));
          continue;
        }
        const result = session.supervisor.history.get(record.runId);
        const view = result && this.finishedView(session, record, result);
        if (view) runs.push(view);
      }
    }
    const sessions = [...this.sessions.values()].map(sessionView);
    const questions = [...this.asked.values()].map((asked) =>
      questionView(asked, this.sessions.get(asked.where.sessionId)),
    );
    return { type: "hello", sessions, runs, questions };
  }

  private broadcast(event: object): void {
    if (this.pages.size === 0) return;
    const bytes = encodeEvent(event);
    for (const page of this.pages) page.send(bytes);
  }
}

function concat(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}
