// Effect metadata of every dispatched call, kept in memory for the server's life and shared by all
// brokers: who called what, when, and how it ended. Never arguments, never results.
import { randomUUID } from "node:crypto";
import { ReplError } from "../errors.ts";
import { JOURNAL_MAX_RECORDS } from "../limits.ts";

export type JournalStatus = "dispatched" | "completed" | "tool_error" | "outcome_unknown";

export interface JournalRecord {
  id: string;
  session_id: string;
  project: string;
  run_id: string | null;
  server: string;
  tool: string;
  started_ms: number;
  finished_ms: number | null;
  status: JournalStatus;
}

const cut = (text: string, max: number) => (text.length > max ? text.slice(0, max) : text);

export class Journal {
  private readonly records: JournalRecord[] = [];

  /** Records a call about to be sent. Refuses (before dispatch) when every slot holds a call in flight. */
  dispatched(fields: {
    session_id: string;
    project: string;
    run_id: string | null;
    server: string;
    tool: string;
  }) {
    if (this.records.length >= JOURNAL_MAX_RECORDS) {
      const oldestDone = this.records.findIndex((record) => record.status !== "dispatched");
      if (oldestDone === -1) {
        throw new ReplError(
          "JOURNAL_FULL",
          "MCP journal is full of calls in flight; wait for them to finish",
        );
      }
      this.records.splice(oldestDone, 1);
    }
    const now = Date.now();
    const record: JournalRecord = {
      id: `${now}-${randomUUID()}`,
      session_id: cut(fields.session_id, 400),
      project: cut(fields.project, 4096),
      run_id: fields.run_id === null ? null : cut(fields.run_id, 400),
      server: cut(fields.server, 400),
      tool: cut(fields.tool, 400),
      started_ms: now,
      finished_ms: null,
      status: "dispatched",
    };
    this.records.push(record);
    return record;
  }

  finish(record: JournalRecord, status: Exclude<JournalStatus, "dispatched">): void {
    record.status = status;
    record.finished_ms = Date.now();
  }

  list(): JournalRecord[] {
    return this.records.map((record) => ({ ...record }));
  }

  get size(): number {
    return this.records.length;
  }
}
