// Long runs: start a cell without waiting, poll it, cancel it.
import * as v from "valibot";
import { HISTORY_RUNS, LIVE_STREAM_MAX_BYTES } from "../../limits.ts";
import { ExecutionResult } from "../../worker/result.ts";
import { ActiveRun } from "../../worker/run.ts";
import { NEXT_POLL } from "../elicitation.ts";
import { CellInput, Failed, failureFrom, Identity, RoutedFailure, SessionId, stamp } from "./common.ts";
import { defineTool, type ToolCall } from "./tool.ts";

export const EXTERNAL_EFFECTS = "May already have occurred; never retried automatically";

const Started = v.object({
  ...Identity,
  run_id: v.string(),
  status: v.literal("starting"),
  poll_tool: v.literal("python_run"),
  cancel_tool: v.literal("python_cancel"),
});

export const pythonStart = defineTool({
  name: "python_start",
  description:
    "Start a cell and return at once with its run_id: prefer it to execute_python for a cell that may run " +
    "longer than about 30 s, or outlast the client's request timeout. Same arguments as execute_python. Poll python_run(run_id) for live output and the final " +
    "result; stop it with python_cancel. One run at a time per session.",
  input: CellInput,
  output: v.union([Started, RoutedFailure]),
  sessionRequiredWhenStateless: true,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async handle(args, ctx, call) {
    const session = ctx.sessions.route(args.session_id);
    // Not tied to this request: the server owns the run until it ends or the server shuts down.
    const started = session.supervisor.begin({
      task: { kind: "cell", code: args.code },
      timeoutSeconds: args.timeout,
      reset: args.reset,
      expectedGeneration: args.expected_generation,
    });
    if (!(started instanceof ActiveRun)) return stamp(session, failureFrom(started));
    // Its client takes forms: a question of this run waits for the next python_run poll to carry it.
    if (call.elicitation) started.questions.attach(NEXT_POLL);
    return stamp(session, {
      run_id: started.id,
      status: "starting",
      poll_tool: "python_run",
      cancel_tool: "python_cancel",
    } as const);
  },
});

const LiveRun = v.object({
  ...Identity,
  run_id: v.string(),
  status: v.picklist(["starting", "running"]),
  elapsed_ms: v.number(),
  stdout: v.string(),
  stderr: v.string(),
  native_stderr: v.string(),
  output_limit_bytes_per_stream: v.number(),
  /** What the run waits for the person to answer, e.g. "approval of crm.delete_record". */
  waiting_for: v.optional(v.string()),
});

/** Not found: never has `success`, so it cannot be mistaken for a finished run's result. */
const RunNotFound = v.object({ ...Failed, ...Identity, success: v.optional(v.never()) });

export const pythonRun = defineTool({
  name: "python_run",
  description:
    "Inspect a run: the active run's live output and status, or a finished run's complete result " +
    `(the last ${HISTORY_RUNS} per session are kept). Omit run_id for the active run, else the latest result.`,
  input: v.strictObject({
    session_id: v.optional(SessionId),
    run_id: v.optional(v.string()),
  }),
  output: v.union([LiveRun, ExecutionResult, RunNotFound]),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handle(args, ctx, call) {
    const session = ctx.sessions.route(args.session_id);
    const supervisor = session.supervisor;
    const active = supervisor.active;
    if (active && (args.run_id === undefined || args.run_id === active.id)) {
      await askDuringPoll(active, call);
      const waiting = active.questions.describeWaiting();
      return stamp(session, {
        run_id: active.id,
        status: active.status,
        elapsed_ms: active.elapsedMs(),
        stdout: active.live.stdout,
        stderr: active.live.stderr,
        native_stderr: active.nativeStderr(),
        output_limit_bytes_per_stream: LIVE_STREAM_MAX_BYTES,
        ...(waiting ? { waiting_for: waiting } : {}),
      });
    }
    const finished =
      args.run_id === undefined ? supervisor.history.latest() : supervisor.history.get(args.run_id);
    if (finished) return finished;
    return stamp(session, {
      error: `Run not found; history retains last ${HISTORY_RUNS} runs`,
      error_code: "RUN_NOT_FOUND",
    } as const);
  },
});

/**
 * A poll of a run with questions waiting, from a client that takes forms: they are put to the person
 * during this call, which answers once they are settled (or the client gives up on it). Questions that
 * another request is asking already are not asked twice: this poll then answers at once, with the run's
 * `waiting_for`.
 */
async function askDuringPoll(run: ActiveRun, call: ToolCall): Promise<void> {
  const { elicitation } = call;
  if (!elicitation) return;
  const waiting = run.questions.carriable(elicitation);
  if (waiting.length === 0) return;
  const detach = run.questions.attach(elicitation);
  try {
    await run.questions.settled(waiting, call.signal);
  } finally {
    detach();
  }
}

const CancelRequested = v.object({
  ...Identity,
  cancel_requested: v.literal(true),
  run_id: v.string(),
  external_effects: v.string(),
});
const NothingToCancel = v.object({ ...Identity, ...Failed, cancel_requested: v.literal(false) });

export const pythonCancel = defineTool({
  name: "python_cancel",
  description:
    "Request cancellation of the active run (or of run_id if it is the active one). Returns at once; poll " +
    "python_run until the result has success. Detached child process groups are killed, the cell gets " +
    "SIGINT and 2 s to stop, then the worker is killed. What the cell already did outside stays done.",
  input: v.strictObject({
    session_id: v.optional(SessionId),
    run_id: v.optional(v.string()),
  }),
  output: v.union([CancelRequested, NothingToCancel]),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async handle(args, ctx) {
    const session = ctx.sessions.route(args.session_id);
    const run = session.supervisor.cancel(args.run_id);
    if (!run) {
      return stamp(session, {
        cancel_requested: false,
        error: "No matching active run",
        error_code: "NO_ACTIVE_RUN",
      } as const);
    }
    return stamp(session, {
      cancel_requested: true,
      run_id: run.id,
      external_effects: EXTERNAL_EFFECTS,
    } as const);
  },
});
