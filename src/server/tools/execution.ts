// Running code to completion: execute_python (a cell) and python_execute_file (a saved file).
import { statSync } from "node:fs";
import { resolve } from "node:path";
import * as v from "valibot";
import {
  ARGV_MAX_BYTES,
  ARGV_MAX_ITEMS,
  CODE_MAX_BYTES,
  TIMEOUT_DEFAULT_SECONDS,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
} from "../../limits.ts";
import { sizeText } from "../../text/size.ts";
import { utf8Bytes } from "../../text/utf8.ts";
import { ExecutionResult, type Failure } from "../../worker/result.ts";
import type { ActiveRun } from "../../worker/run.ts";
import type { RunPlan } from "../run-plan.ts";
import { CellInput, ExpectedGeneration, SessionId, Timeout } from "./common.ts";
import { defineTool, type ServerContext, type ToolCall } from "./tool.ts";

const WRITES = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };

const FileInput = v.strictObject({
  session_id: SessionId,
  path: v.pipe(v.string(), v.minLength(1), v.description("The file to run")),
  argv: v.optional(v.pipe(v.array(v.string()), v.maxLength(ARGV_MAX_ITEMS)), []),
  mode: v.optional(v.picklist(["persistent", "fresh"]), "persistent"),
  timeout: Timeout,
  expected_generation: ExpectedGeneration,
});

export const executePython = defineTool({
  name: "execute_python",
  description:
    "Run Python in a persistent, trusted local worker with full host access (not a sandbox). Variables, " +
    "imports and the asyncio loop survive between calls; top-level await works; the trailing expression's " +
    "value is returned as a safe preview that never calls your __repr__ (a value too large for it comes " +
    "back as an artifact reference: use artifact_read). Cells have mcp.call()/mcp.acall(), artifact() " +
    "for tools of MCP servers the user granted, sh() for shell commands, checkpoint()/restore(), and " +
    "display(obj) to return pictures (matplotlib figures come back as images by themselves). " +
    "Granted tools are also typed functions, mcp.<server>.<tool>(**kwargs): read mcp.<server>.source() for their signatures, not their schemas. " +
    `timeout is ${TIMEOUT_MIN_SECONDS}..${TIMEOUT_MAX_SECONDS} s (default ${TIMEOUT_DEFAULT_SECONDS}); code is at most ${sizeText(CODE_MAX_BYTES)}. reset=true ` +
    "restarts the worker, clearing variables, cwd and environment changes. A cell that may run longer than " +
    "about 30 s belongs in python_start (then poll python_run): a client may block on, or give up, a long call. " +
    "A timeout or cancellation stops the cell, but external effects it already caused may have happened.",
  input: CellInput,
  output: ExecutionResult,
  sessionRequiredWhenStateless: true,
  annotations: WRITES,
  plan: planCell,
  handle: async (args, ctx, call) => runToEnd(planCell(args, ctx), call),
});

export const pythonExecuteFile = defineTool({
  name: "python_execute_file",
  description:
    "Run a saved Python file as __main__ with sys.argv = [path, *argv] (no shell quoting). A relative path " +
    "resolves against the session's project. mode=persistent runs in the session namespace (variables it " +
    "sets stay); mode=fresh runs in a separate worker of the same environment and leaves the namespace " +
    "alone. sys.exit(N) is reported as exit_code. Poll or cancel it with python_run/python_cancel.",
  input: FileInput,
  output: ExecutionResult,
  annotations: WRITES,
  plan: planFile,
  handle: async (args, ctx, call) => runToEnd(planFile(args, ctx), call),
});

function planCell(args: v.InferOutput<typeof CellInput>, ctx: ServerContext): RunPlan {
  const session = ctx.sessions.route(args.session_id);
  const request = {
    task: { kind: "cell" as const, code: args.code },
    timeoutSeconds: args.timeout,
    reset: args.reset,
    expectedGeneration: args.expected_generation,
  };
  return { session, request };
}

function planFile(args: v.InferOutput<typeof FileInput>, ctx: ServerContext): RunPlan {
  const session = ctx.sessions.route(args.session_id);
  const path = resolve(session.project, args.path);
  const task = { kind: "file" as const, path, argv: args.argv, mode: args.mode };
  const refuse = (failure: Failure) => ({ session, refusal: session.supervisor.refusal(task, failure) });
  if (args.argv.reduce((bytes, arg) => bytes + utf8Bytes(arg), 0) > ARGV_MAX_BYTES) {
    return refuse({
      code: "LIMIT_EXCEEDED",
      message: `argv is limited to ${ARGV_MAX_ITEMS} strings and ${sizeText(ARGV_MAX_BYTES)} in all`,
    });
  }
  // A kernel session's file is on the kernel's host: the engine there checks it (FILE_NOT_FOUND too).
  if (!session.kernel && !isRegularFile(path)) {
    return refuse({
      code: "FILE_NOT_FOUND",
      message: `Python file not found or not a regular file: ${path}`,
    });
  }
  const request = {
    task,
    timeoutSeconds: args.timeout,
    reset: false,
    expectedGeneration: args.expected_generation,
  };
  return { session, request };
}

/** The plain (non-task) call: run in the session's slot and answer with the final result. */
async function runToEnd(plan: RunPlan, call: ToolCall): Promise<ExecutionResult> {
  if (plan.refusal) return plan.refusal;
  const { elicitation } = call;
  let detach: (() => void) | undefined;
  const onRun = (run: ActiveRun) => {
    call.onRun?.(run);
    // While this call is in flight its client can answer the run's questions.
    if (elicitation) detach = run.questions.attach(elicitation);
  };
  try {
    return await plan.session.supervisor.execute({ ...plan.request, signal: call.signal, onRun });
  } finally {
    detach?.();
  }
}

function isRegularFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
