// Effect metadata of every dispatched call, kept in memory for the server's life and shared by all
// brokers: who called what, when, and how it ended. Never arguments, never results. With --journal the
// same records are also kept on disk (journal-file.ts) so that after a crash the agent can still see
// which external writes may have happened.
import * as v from "valibot";
import { ReplError } from "../errors.ts";
import {
  JOURNAL_MAX_RECORDS,
  JOURNAL_MAX_SERIALIZED_BYTES,
  JOURNAL_PROJECT_MAX_CHARS,
  JOURNAL_TEXT_MAX_CHARS,
} from "../limits.ts";
import { utf8Bytes } from "../text/utf8.ts";

const Text = v.pipe(v.string(), v.maxLength(JOURNAL_TEXT_MAX_CHARS));
const Millis = v.pipe(v.number(), v.integer(), v.minValue(0));

/** `denied` and `not_approved`: a call the person refused, or nobody approved in time; never sent. */
export const JOURNAL_STATUSES = [
  "dispatched",
  "completed",
  "tool_error",
  "outcome_unknown",
  "denied",
  "not_approved",
] as const;

/**
 * The person's say on a call that needed approval (docs/broker.md "Approvals"): what was decided, where
 * and when. `session` is an earlier "allow for the session"; no channel means nobody could be asked.
 */
export const JournalApproval = v.strictObject({
  decision: v.picklist(["allow_once", "allow_session", "deny", "timed_out", "no_channel", "cancelled"]),
  channel: v.nullable(v.picklist(["elicitation", "viewer", "session"])),
  decided_ms: Millis,
});
export type JournalApproval = v.InferOutput<typeof JournalApproval>;
/** What an approver returns; the broker stamps the time. */
export type Verdict = Omit<JournalApproval, "decided_ms">;

/** One record: these keys, in this order, `approval` only where one was asked (a journal file with any other key is refused). */
export const JournalRecordSchema = v.strictObject({
  id: Text,
  session_id: Text,
  project: v.pipe(v.string(), v.maxLength(JOURNAL_PROJECT_MAX_CHARS)),
  run_id: v.nullable(Text),
  server: Text,
  tool: Text,
  started_ms: Millis,
  finished_ms: v.nullable(Millis),
  status: v.picklist(JOURNAL_STATUSES),
  approval: v.optional(JournalApproval),
  /** "network": a contained cell's connection to a host the person was asked about (server "network", tool "host:port"). */
  kind: v.optional(v.literal("network")),
});

export type JournalRecord = v.InferOutput<typeof JournalRecordSchema>;
export type JournalStatus = JournalRecord["status"];

/** The records one client may list (mcp.journal()): its own sessions', see SessionScope. */
export interface JournalView {
  list(): JournalRecord[];
}

/** Where changes go to become durable; absent without --journal. */
export interface JournalStore {
  /** Schedules a write of the current records; resolves once a write containing them is on disk. */
  persist(records: readonly JournalRecord[]): Promise<void>;
}

export const JOURNAL_WRITE_FAILED =
  "MCP call completed but durable journal update failed; do not retry blindly";
export const JOURNAL_UNKNOWN_WRITE_FAILED =
  "MCP call outcome is unknown (it was sent and may have taken effect), and the durable journal could not " +
  "record that; do not retry blindly: check the target system and the --journal file";

interface CallFields {
  session_id: string;
  project: string;
  run_id: string | null;
  server: string;
  tool: string;
}

const cut = (text: string, max: number) => (text.length > max ? text.slice(0, max) : text);

/** A call in flight grows when it finishes (a 13-digit finished_ms, "outcome_unknown"): room is kept. */
const FINISH_GROWTH_BYTES = 14;
const bytesOf = (record: JournalRecord) =>
  utf8Bytes(JSON.stringify(record)) + (record.status === "dispatched" ? FINISH_GROWTH_BYTES : 0);

export class Journal {
  private readonly records: JournalRecord[];
  /** Each record's serialized size, kept current so the byte bound costs nothing per call. */
  private readonly sizes = new WeakMap<JournalRecord, number>();
  private recordBytes = 0;
  /** Records a previous server left in the durable file: no session of this process made them. */
  private readonly earlier = new WeakSet<JournalRecord>();

  constructor(
    private readonly store?: JournalStore,
    loaded: JournalRecord[] = [],
  ) {
    this.records = loaded;
    for (const record of loaded) {
      this.measure(record);
      this.earlier.add(record);
    }
  }

  /** Records a call about to be sent. Refuses (before dispatch) when every slot holds a call in flight. */
  dispatched(fields: CallFields & { approval?: JournalApproval }): JournalRecord {
    return this.add(fields, "dispatched");
  }

  /** Records a call that was not sent because the person denied it or nobody approved it. */
  refused(
    fields: CallFields & { approval: JournalApproval },
    status: "denied" | "not_approved",
  ): JournalRecord {
    return this.add(fields, status);
  }

  /**
   * Records the person's decision on a contained cell's connection (docs/sandbox.md): the host and port,
   * never the request. Nothing was sent by the broker, so it is final at once.
   */
  connection(
    fields: Omit<CallFields, "server" | "tool"> & { host: string; port: number; approval: JournalApproval },
    allowed: boolean,
  ): JournalRecord {
    const { host, port, ...rest } = fields;
    const record = this.add(
      { ...rest, server: "network", tool: `${host}:${port}` },
      allowed ? "completed" : fields.approval.decision === "deny" ? "denied" : "not_approved",
    );
    record.kind = "network";
    return record;
  }

  private add(fields: CallFields & { approval?: JournalApproval }, status: JournalStatus): JournalRecord {
    const now = Date.now();
    const record: JournalRecord = {
      id: `${now}-${crypto.randomUUID()}`,
      session_id: cut(fields.session_id, JOURNAL_TEXT_MAX_CHARS),
      project: cut(fields.project, JOURNAL_PROJECT_MAX_CHARS),
      run_id: fields.run_id === null ? null : cut(fields.run_id, JOURNAL_TEXT_MAX_CHARS),
      server: cut(fields.server, JOURNAL_TEXT_MAX_CHARS),
      tool: cut(fields.tool, JOURNAL_TEXT_MAX_CHARS),
      started_ms: now,
      finished_ms: status === "dispatched" ? null : now,
      status,
      ...(fields.approval ? { approval: { ...fields.approval } } : {}),
    };
    this.records.push(record);
    this.measure(record);
    while (
      this.records.length > JOURNAL_MAX_RECORDS ||
      this.serializedBytes() > JOURNAL_MAX_SERIALIZED_BYTES
    ) {
      const oldestDone = this.records.findIndex((candidate) => candidate.status !== "dispatched");
      if (oldestDone === -1) {
        this.forget(this.records.length - 1);
        throw new ReplError(
          "JOURNAL_FULL",
          "MCP journal is full of calls in flight; wait for them to finish",
        );
      }
      this.forget(oldestDone);
    }
    return record;
  }

  finish(record: JournalRecord, status: Exclude<JournalStatus, "dispatched">): void {
    this.recordBytes -= this.sizes.get(record) ?? 0;
    record.status = status;
    record.finished_ms = Date.now();
    this.measure(record);
  }

  /** Forgets a record whose call was never sent (its dispatch record could not be made durable). */
  discard(record: JournalRecord): void {
    const index = this.records.indexOf(record);
    if (index !== -1) this.forget(index);
  }

  /** Resolves when the records as they are now are durable (at once without --journal). */
  persisted(): Promise<void> {
    return this.store ? this.store.persist(this.records) : Promise.resolve();
  }

  list(): JournalRecord[] {
    return this.records.map((record) => ({ ...record }));
  }

  /** The records of the sessions `sees` accepts, and with `earlier` those a previous server left. */
  visibleTo(sees: (sessionId: string) => boolean, earlier: boolean): JournalRecord[] {
    return this.records
      .filter((record) => sees(record.session_id) || (earlier && this.earlier.has(record)))
      .map((record) => ({ ...record }));
  }

  /** The sessions that have records here. */
  sessionIds(): Set<string> {
    return new Set(this.records.map((record) => record.session_id));
  }

  get size(): number {
    return this.records.length;
  }

  /** At least the size of JSON.stringify(records): brackets, the records, and commas between them. */
  private serializedBytes(): number {
    return 2 + this.recordBytes + Math.max(0, this.records.length - 1);
  }

  private measure(record: JournalRecord): void {
    const bytes = bytesOf(record);
    this.sizes.set(record, bytes);
    this.recordBytes += bytes;
  }

  private forget(index: number): void {
    const [record] = this.records.splice(index, 1);
    if (record) this.recordBytes -= this.sizes.get(record) ?? 0;
  }
}
