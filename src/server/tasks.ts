// Long cells as MCP tasks, in both protocol eras. An execution tool's run becomes a task whose id is the
// run id, so python_run and python_cancel see it too; a task lives while its run is active or retained
// in its session's run history, and for at most its ttl once it has ended. The board belongs to one
// client (its SessionScope), not to one MCP server instance: under 2026-07-28 every HTTP request gets a
// fresh instance, and a later tasks/get must still find the task.
// - 2025-11-25 (legacy): the client asks with `task` on tools/call and gets the task at once; it polls
//   tasks/get (status only), fetches the result with tasks/result, and may list tasks.
// - 2026-07-28 (the io.modelcontextprotocol/tasks extension, SEP-2663): the client only says it can take
//   a task; the server decides. A run still going after TASK_PROMOTE_AFTER_MS is answered with
//   `resultType: "task"`; tasks/get then carries the result inline once it is done.
// A run that waits for the person (an approval, input()) is `input_required` in both: a 2025-11-25
// client is asked during its tasks/result; a 2026-07-28 one reads the forms in tasks/get and answers
// with tasks/update.
import { RELATED_TASK_META_KEY } from "@modelcontextprotocol/server";
import * as v from "valibot";
import { ProtocolError } from "../errors.ts";
import {
  PROGRESS_OUTPUT_MAX_BYTES,
  TASK_LIST_PAGE_SIZE,
  TASK_POLL_INTERVAL_MS,
  TASK_TTL_DEFAULT_MS,
  TASKS_MAX,
} from "../limits.ts";
import type { Asked, Channel } from "../person/questions.ts";
import { tailUtf8 } from "../text/utf8.ts";
import { type ExecutionResult, Failures } from "../worker/result.ts";
import { ActiveRun } from "../worker/run.ts";
import type { Supervisor } from "../worker/supervisor.ts";
import { ElicitResponse, formFor, replyFrom } from "./elicitation.ts";
import { isErrorValue } from "./render.ts";
import type { RunPlan } from "./run-plan.ts";

type Status = "working" | "input_required" | "completed" | "failed" | "cancelled";

/** The CallToolResult a plain call would have returned (render.ts's output). */
export type Rendered = {
  content: unknown[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
};
export type Render = (value: Record<string, unknown>) => Rendered;

interface Entry {
  readonly seq: number;
  readonly taskId: string;
  readonly createdAt: number;
  readonly ttlMs: number;
  updatedAt: number;
  /** The run behind the task; absent when the call was answered without running (busy, bad path). */
  readonly run?: ActiveRun;
  readonly supervisor?: Supervisor;
  /** Settles when the run ends. */
  readonly finished: Promise<void>;
  /**
   * The final value, once known. A run's is read back from its session's run history, which bounds the
   * pictures it keeps inline; only a call answered without a run (small) keeps its own.
   */
  value?: Record<string, unknown>;
  ended?: { status: Exclude<Status, "working" | "input_required">; message: string };
  /** Questions of the run put to the client through this task (its client takes forms), by id. */
  readonly asking: Map<string, Asked>;
}

/** The fields both eras' task objects share, under their era's names. */
interface TaskTimes {
  taskId: string;
  statusMessage: string;
  createdAt: string;
  lastUpdatedAt: string;
}

export class TaskBoard {
  private readonly entries = new Map<string, Entry>();
  private seq = 0;

  constructor(private readonly render: Render) {}

  /**
   * Starts the planned run as a task; a plan that is refused becomes a task that has already ended.
   * `asks`: the client takes elicitation forms, so the run's questions become the task's input_required.
   */
  start(plan: RunPlan, ttlMs: number | undefined, onRun?: (run: ActiveRun) => void, asks = false): string {
    const started = plan.refusal ?? plan.session.supervisor.begin({ ...plan.request, onRun });
    if (started instanceof ActiveRun) {
      const taskId = this.add(started.id, started.done, ttlMs, started, plan.session.supervisor);
      if (asks) started.questions.attach(this.askingChannel(this.find(taskId)));
      return taskId;
    }
    return this.add(started.run_id, Promise.resolve(started), ttlMs);
  }

  /** Records the run's questions on the task; the client answers by tasks/result or tasks/update. */
  private askingChannel(entry: Entry): Channel {
    const changed = () => {
      entry.updatedAt = Date.now();
    };
    return {
      name: "elicitation",
      // It marks the task waiting and keeps the forms for a later request: the tasks/result that puts
      // them to the person (2025-11-25) or tasks/get (2026-07-28).
      standsIn: true,
      reaches: (question) => !(question.kind === "input" && question.secret),
      offer: (asked) => {
        entry.asking.set(asked.id, asked);
        changed();
      },
      withdraw: (asked) => {
        if (entry.asking.delete(asked.id)) changed();
      },
    };
  }

  /** A call that failed before it could plan a run still answers with a task, already ended. */
  failed(value: Record<string, unknown>, ttlMs: number | undefined): string {
    return this.add(crypto.randomUUID(), Promise.resolve(value), ttlMs);
  }

  /** The rendered result once the run ends (or at once when it has). */
  async done(taskId: string): Promise<Rendered> {
    const entry = this.find(taskId);
    await entry.finished;
    return this.result(entry) as Rendered;
  }

  /** What the plain call would have answered, rendered now from what is retained; undefined while running. */
  private result(entry: Entry): Rendered | undefined {
    if (!entry.ended) return undefined;
    const value = entry.supervisor?.history.get(entry.taskId) ?? entry.value;
    return value ? this.render(value) : undefined;
  }

  /** Stops the run behind a task whose creating request was cancelled before it was answered. */
  abandon(taskId: string): void {
    this.entries.get(taskId)?.run?.cancel(Failures.cancelled);
  }

  // ---- 2025-11-25 ----

  /** tasks/get, tools/call's `task`: the status without the result. */
  legacyTask(taskId: string) {
    const entry = this.find(taskId);
    const times = this.times(entry);
    return {
      ...times,
      status: this.status(entry),
      ttl: entry.ttlMs,
      pollInterval: TASK_POLL_INTERVAL_MS,
    };
  }

  /**
   * tasks/result: waits for the end and answers exactly what the plain call would have answered. While it
   * waits, `elicitation` (the client takes forms) puts the run's questions to the person.
   */
  async legacyResult(taskId: string, signal: AbortSignal, elicitation?: Channel): Promise<Rendered> {
    const entry = this.find(taskId);
    const aborted = new Promise<never>((_, reject) => {
      const stop = () => reject(new ProtocolError("tasks/result request cancelled"));
      if (signal.aborted) stop();
      signal.addEventListener("abort", stop, { once: true });
    });
    const detach = elicitation && entry.run?.questions.attach(elicitation);
    try {
      await Promise.race([entry.finished, aborted]);
    } finally {
      detach?.();
    }
    const result = this.result(entry) as Rendered;
    return { ...result, _meta: { ...result._meta, [RELATED_TASK_META_KEY]: { taskId } } };
  }

  legacyList(cursor: string | undefined) {
    this.prune();
    const after = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isSafeInteger(after) || after < 0) throw new ProtocolError("Invalid cursor for tasks/list");
    const page = [...this.entries.values()]
      .filter((entry) => entry.seq > after)
      .slice(0, TASK_LIST_PAGE_SIZE);
    const last = page.at(-1);
    const more = last !== undefined && [...this.entries.values()].some((entry) => entry.seq > last.seq);
    return {
      tasks: page.map((entry) => this.legacyTask(entry.taskId)),
      nextCursor: more ? String(last.seq) : undefined,
    };
  }

  /** tasks/cancel (2025): refuses a task that has ended; answers the task as it is now. */
  legacyCancel(taskId: string) {
    const entry = this.find(taskId);
    const status = this.status(entry);
    if (status !== "working") throw new ProtocolError(`Task already ended (${status}); nothing to cancel`);
    this.cancel(entry);
    return this.legacyTask(taskId);
  }

  // ---- 2026-07-28 (SEP-2663) ----

  /** The CreateTaskResult a tools/call is answered with. */
  created(taskId: string) {
    return { resultType: "task" as const, ...this.modernTask(this.find(taskId)) };
  }

  /** tasks/get: the task with its result inline once it has one, or the forms it waits for. */
  detailed(taskId: string) {
    const entry = this.find(taskId);
    const task = this.modernTask(entry);
    if (task.status === "input_required") {
      const inputRequests = Object.fromEntries(
        [...entry.asking].map(([id, asked]) => [
          id,
          { method: "elicitation/create", params: formFor(asked.question) },
        ]),
      );
      return { ...task, inputRequests };
    }
    const result = task.status === "completed" ? this.result(entry) : undefined;
    return result ? { ...task, result } : task;
  }

  /** tasks/update: the person's answers to the forms of an input_required task; others are ignored. */
  update(taskId: string, responses: Record<string, unknown>): Record<string, never> {
    const entry = this.find(taskId);
    for (const [id, response] of Object.entries(responses)) {
      const asked = entry.asking.get(id);
      const parsed = v.safeParse(ElicitResponse, response);
      if (asked && parsed.success) asked.answer("elicitation", replyFrom(asked.question, parsed.output));
    }
    return {};
  }

  /** tasks/cancel (2026): an acknowledgement; a task that already ended is left as it is. */
  modernCancel(taskId: string): Record<string, never> {
    const entry = this.find(taskId);
    if (this.status(entry) === "working") this.cancel(entry);
    return {};
  }

  private modernTask(entry: Entry) {
    const status = this.status(entry);
    return {
      ...this.times(entry),
      // Under SEP-2663 a tool call that returned isError still completed; "failed" is for JSON-RPC errors.
      status: status === "failed" ? ("completed" as const) : status,
      ttlMs: entry.ttlMs,
      pollIntervalMs: TASK_POLL_INTERVAL_MS,
    };
  }

  // ---- shared ----

  /** python_cancel's guarantees: the run is asked to stop now and leaves no effects after its end. */
  private cancel(entry: Entry): void {
    entry.run?.cancel(Failures.cancelled);
    entry.updatedAt = Date.now();
  }

  private add(
    taskId: string,
    value: Promise<Record<string, unknown>>,
    ttlMs: number | undefined,
    run?: ActiveRun,
    supervisor?: Supervisor,
  ): string {
    this.prune();
    const now = Date.now();
    const entry: Entry = {
      seq: ++this.seq,
      taskId,
      createdAt: now,
      updatedAt: now,
      ttlMs: Math.max(0, ttlMs ?? TASK_TTL_DEFAULT_MS),
      run,
      supervisor,
      asking: new Map(),
      finished: value.then((result) => {
        if (!supervisor) entry.value = result;
        entry.ended = ending(run, result);
        entry.updatedAt = Date.now();
      }),
    };
    this.entries.set(taskId, entry);
    return taskId;
  }

  private find(taskId: string): Entry {
    this.prune();
    const entry = this.entries.get(taskId);
    if (!entry) throw new ProtocolError("Task not found; it expired or left the 64-run history");
    return entry;
  }

  private status(entry: Entry): Status {
    if (entry.ended) return entry.ended.status;
    if (entry.run?.cancelReason === Failures.cancelled) return "cancelled";
    return [...entry.asking.values()].some((asked) => asked.open) ? "input_required" : "working";
  }

  private times(entry: Entry): TaskTimes {
    return {
      taskId: entry.taskId,
      statusMessage: entry.ended?.message ?? entry.run?.statusMessage() ?? "starting",
      createdAt: new Date(entry.createdAt).toISOString(),
      lastUpdatedAt: new Date(entry.updatedAt).toISOString(),
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

/** How a task ended, in the 2025-11-25 vocabulary: a cell that failed (an isError result) "failed". */
function ending(run: ActiveRun | undefined, result: Record<string, unknown>): NonNullable<Entry["ended"]> {
  const value = result as Partial<ExecutionResult>;
  if (run?.cancelReason === Failures.cancelled)
    return { status: "cancelled", message: Failures.cancelled.message };
  if (!isErrorValue(result)) {
    const seconds = ((value?.elapsed_ms ?? 0) / 1000).toFixed(1);
    return { status: "completed", message: `finished in ${seconds} s` };
  }
  const error = typeof value?.error === "string" ? value.error : "failed";
  return {
    status: "failed",
    message: tailUtf8(error.split("\n").at(-1) ?? error, PROGRESS_OUTPUT_MAX_BYTES),
  };
}
