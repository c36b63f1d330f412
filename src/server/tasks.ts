// MCP tasks (protocol 2025-11-25, experimental in the SDK): an execution tool called with `task` starts
// its run the way python_start does and answers at once with a task whose id is the run id, so
// python_run and python_cancel see it too. A task lives while its run is active or retained in its
// session's run history, and for at most its ttl once it has ended.
import type { CallToolResult, Task } from "@modelcontextprotocol/sdk/types.js";
import { ProtocolError } from "../errors.ts";
import {
  PROGRESS_OUTPUT_MAX_BYTES,
  TASK_LIST_PAGE_SIZE,
  TASK_POLL_INTERVAL_MS,
  TASK_TTL_DEFAULT_MS,
  TASKS_MAX,
} from "../limits.ts";
import { tailUtf8 } from "../text/utf8.ts";
import { type ExecutionResult, Failures } from "../worker/result.ts";
import { ActiveRun } from "../worker/run.ts";
import type { Supervisor } from "../worker/supervisor.ts";
import type { RunPlan } from "./tools/tool.ts";

type Ended = "completed" | "failed" | "cancelled";

interface Entry {
  readonly seq: number;
  readonly taskId: string;
  readonly createdAt: number;
  readonly ttlMs: number;
  updatedAt: number;
  /** The run behind the task; absent when the call was answered without running (busy, bad path). */
  readonly run?: ActiveRun;
  readonly supervisor?: Supervisor;
  /** The CallToolResult the plain call would have returned, once known. */
  readonly done: Promise<CallToolResult>;
  ended?: { status: Ended; message: string };
}

export type Render = (value: Record<string, unknown>) => CallToolResult;

export class TaskBoard {
  private readonly entries = new Map<string, Entry>();
  private seq = 0;

  constructor(private readonly render: Render) {}

  /** Starts the planned run as a task; a plan that is refused becomes a task that has already failed. */
  start(plan: RunPlan, ttlMs: number | undefined, onRun?: (run: ActiveRun) => void): Task {
    const started = plan.refusal ?? plan.session.supervisor.begin({ ...plan.request, onRun });
    if (started instanceof ActiveRun) {
      return this.add(started.id, started.done, ttlMs, started, plan.session.supervisor);
    }
    return this.add(started.run_id, Promise.resolve(started), ttlMs);
  }

  /** A call that failed before it could plan a run still answers with a task, already failed. */
  failed(value: Record<string, unknown>, ttlMs: number | undefined): Task {
    return this.add(crypto.randomUUID(), Promise.resolve(value), ttlMs);
  }

  get(taskId: string): Task {
    return this.describe(this.find(taskId));
  }

  /** Waits for the end and answers exactly what the plain call would have answered. */
  async result(taskId: string, signal: AbortSignal): Promise<CallToolResult> {
    const entry = this.find(taskId);
    const aborted = new Promise<never>((_, reject) => {
      const stop = () => reject(new ProtocolError("tasks/result request cancelled"));
      if (signal.aborted) stop();
      signal.addEventListener("abort", stop, { once: true });
    });
    const result = await Promise.race([entry.done, aborted]);
    return { ...result, _meta: { ...result._meta, "io.modelcontextprotocol/related-task": { taskId } } };
  }

  list(cursor: string | undefined): { tasks: Task[]; nextCursor?: string } {
    this.prune();
    const after = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isSafeInteger(after) || after < 0) throw new ProtocolError("Invalid cursor for tasks/list");
    const page = [...this.entries.values()]
      .filter((entry) => entry.seq > after)
      .slice(0, TASK_LIST_PAGE_SIZE);
    const last = page.at(-1);
    const more = last !== undefined && [...this.entries.values()].some((entry) => entry.seq > last.seq);
    return {
      tasks: page.map((entry) => this.describe(entry)),
      nextCursor: more ? String(last.seq) : undefined,
    };
  }

  /** python_cancel's guarantees: the run is asked to stop now and leaves no effects after its end. */
  cancel(taskId: string): Task {
    const entry = this.find(taskId);
    const status = this.status(entry);
    if (status !== "working") throw new ProtocolError(`Task already ended (${status}); nothing to cancel`);
    entry.run?.cancel(Failures.cancelled);
    entry.updatedAt = Date.now();
    return this.describe(entry);
  }

  private add(
    taskId: string,
    value: Promise<Record<string, unknown>>,
    ttlMs: number | undefined,
    run?: ActiveRun,
    supervisor?: Supervisor,
  ): Task {
    this.prune();
    const now = Date.now();
    const done = value.then((result) => this.render(result));
    const entry: Entry = {
      seq: ++this.seq,
      taskId,
      createdAt: now,
      updatedAt: now,
      ttlMs: Math.max(0, ttlMs ?? TASK_TTL_DEFAULT_MS),
      run,
      supervisor,
      done,
    };
    void done.then((result) => {
      entry.ended = ending(run, result);
      entry.updatedAt = Date.now();
    });
    this.entries.set(taskId, entry);
    return this.describe(entry);
  }

  private find(taskId: string): Entry {
    this.prune();
    const entry = this.entries.get(taskId);
    if (!entry) throw new ProtocolError("Task not found; it expired or left the 64-run history");
    return entry;
  }

  private status(entry: Entry): Task["status"] {
    if (entry.ended) return entry.ended.status;
    return entry.run?.cancelReason === Failures.cancelled ? "cancelled" : "working";
  }

  private describe(entry: Entry): Task {
    const status = this.status(entry);
    const message = entry.ended?.message ?? entry.run?.statusMessage() ?? "starting";
    return {
      taskId: entry.taskId,
      status,
      ttl: entry.ttlMs,
      createdAt: new Date(entry.createdAt).toISOString(),
      lastUpdatedAt: new Date(entry.updatedAt).toISOString(),
      pollInterval: TASK_POLL_INTERVAL_MS,
      statusMessage: message,
    };
  }

  /** Forgets tasks whose run left its history or whose ttl passed after they ended. */
  private prune(): void {
    const now = Date.now();
    for (const [taskId, entry] of this.entries) {
      if (!entry.ended) continue;
      const expired = now - entry.createdAt > entry.ttlMs;
      const evicted = entry.supervisor !== undefined && entry.supervisor.history.get(taskId) === undefined;
      if (expired || evicted) this.entries.delete(taskId);
    }
    for (const [taskId, entry] of this.entries) {
      if (this.entries.size <= TASKS_MAX) break;
      if (entry.ended) this.entries.delete(taskId);
    }
  }
}

function ending(run: ActiveRun | undefined, result: CallToolResult): { status: Ended; message: string } {
  const value = result.structuredContent as Partial<ExecutionResult> | undefined;
  if (run?.cancelReason === Failures.cancelled)
    return { status: "cancelled", message: Failures.cancelled.message };
  if (!result.isError) {
    const seconds = ((value?.elapsed_ms ?? 0) / 1000).toFixed(1);
    return { status: "completed", message: `finished in ${seconds} s` };
  }
  const error = typeof value?.error === "string" ? value.error : "failed";
  return {
    status: "failed",
    message: tailUtf8(error.split("\n").at(-1) ?? error, PROGRESS_OUTPUT_MAX_BYTES),
  };
}
