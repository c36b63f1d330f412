// The MCP server: the SDK's low-level Server with our tool table, error model and result rendering, in
// either protocol era. The transports (stdio.ts by the opening message, http/ by each request) decide
// the era and ask createServer for an instance of it; the era changes only what the protocol requires of it: the task
// vocabulary, the capabilities, and A3 (a cell must name its session under 2026-07-28).
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  RELATED_TASK_META_KEY,
  type ServerContext as RequestContext,
  Server,
  type ServerCapabilities,
} from "@modelcontextprotocol/server";
import * as v from "valibot";
import { codeOf, describe, JSONRPC_METHOD_NOT_FOUND, ProtocolError, ReplError } from "../errors.ts";
import { ELICITATION_MARGIN_MS, TASK_PROMOTE_AFTER_MS } from "../limits.ts";
import { log } from "../log.ts";
import type { SessionScope } from "../sessions/scope.ts";
import { NAME, VERSION } from "../version.ts";
import { elicitationChannel, formsDeclared } from "./elicitation.ts";
import type { Era } from "./era.ts";
import { InputRounds } from "./input-rounds.ts";
import { type CallProgress, progressForCall } from "./progress.ts";
import { render } from "./render.ts";
import { serveResources } from "./resources.ts";
import type { RunPlan } from "./run-plan.ts";
import { type ResultStyle, type Style, styleFor } from "./styles/table.ts";
import { renderText } from "./styles/text.ts";
import { TaskBoard } from "./tasks.ts";
import { TOOLS } from "./tools/index.ts";
import type { BoundCall, ClientSettings, ServerContext } from "./tools/tool.ts";

/** How the server describes where cells run: trusted and unrestricted, or contained (--sandbox). */
const TRUST = {
  trusted:
    "repl-mcp runs Python in a persistent local worker with full access to this machine: it is trusted " +
    "execution, not a sandbox.",
  contained:
    "repl-mcp runs Python in a persistent local worker inside an OS sandbox: it writes only its project " +
    "and its own temporary files, cannot read credentials, and reaches only hosts the policy allows or the " +
    "person approves (a refusal is listed in the result's sandbox_denials; python_health shows the policy).",
};

const INSTRUCTIONS =
  " Variables and the asyncio loop persist between execute_python calls. Use " +
  "python_health for diagnostics (it never starts Python), python_start with python_run/python_cancel for " +
  "long work, and python_session_open for independent sessions on other projects. Inside cells, the mcp " +
  "helper calls tools of MCP servers the user configured for this broker only: mcp.call returns the full " +
  "result envelope and mcp.text extracts its text. A trailing value too large to preview is kept whole as " +
  "an artifact: read it in ranges with artifact_read, save it with artifact_save or send it to another " +
  "server with artifact_forward instead of printing it. A timeout or cancellation stops a cell, but " +
  "effects it already had on the outside world stay. Under MCP 2026-07-28 pass session_id (from " +
  "python_health.server.session_id or python_session_open) to execute_python and python_start.";

/** The id of the tasks extension (SEP-2663) in capabilities and in a request's client capabilities. */
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** The revision that defines MCP tasks for the legacy handshake (the 2026 extension is announced apart). */
const TASKS_REVISION = "2025-11-25";

/**
 * The tool list one client gets. Under the text style no tool declares an outputSchema (its results carry
 * no structuredContent); `execution.taskSupport` only goes to a revision that has tasks.
 */
function listingFor(style: ResultStyle, revision: string | undefined) {
  return TOOLS.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema,
    ...(style === "structured" ? { outputSchema: tool.outputSchema } : {}),
    annotations: tool.annotations,
    // The SDK drops the field under 2026-07-28 itself.
    ...(tool.runsAsTask && revision === TASKS_REVISION
      ? { execution: { taskSupport: "optional" as const } }
      : {}),
  }));
}

const CAPABILITIES: Record<Era, Record<string, unknown>> = {
  legacy: {
    tools: { listChanged: false },
    resources: { listChanged: true },
    tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
  },
  // Change notifications travel only on a subscriptions/listen stream under 2026-07-28; the artifact
  // list is not announced there (clients list resources when they want them).
  modern: {
    tools: { listChanged: false },
    resources: { listChanged: false },
    extensions: { [TASKS_EXTENSION]: {} },
  },
};

/** What every client's context starts with. */
export function clientContext(sessions: SessionScope, settings: ClientSettings): ServerContext {
  return {
    sessions,
    tasks: new TaskBoard(render),
    rounds: new InputRounds(settings.approvalTimeoutMs),
    ...settings,
  };
}

/**
 * A legacy client is told of tasks only when the revision it negotiated defines them: the capability is
 * read at `initialize`, after the revision is settled (before it, everything is announced, so the SDK
 * lets the task handlers be registered).
 */
class ReplServer extends Server {
  override getCapabilities(): ServerCapabilities {
    const capabilities = super.getCapabilities();
    const revision = this.getNegotiatedProtocolVersion();
    if (revision === undefined || revision === TASKS_REVISION || !("tasks" in capabilities))
      return capabilities;
    const { tasks: _tasks, ...rest } = capabilities;
    return rest;
  }
}

class MethodNotFound extends Error {
  readonly code = JSONRPC_METHOD_NOT_FOUND;
  constructor() {
    super("Method not found");
  }
}

const TaskId = v.object({ taskId: v.string() });
const LegacyTaskList = v.optional(v.object({ cursor: v.optional(v.string()) }));
type CallParams = { name?: unknown; arguments?: unknown; task?: { ttl?: number } };

/**
 * The requests a 2026-07-28 instance answers (the SDK answers server/discover and subscriptions/listen
 * itself). Any other method is not found; over HTTP the revision wants that said with 404, which the SDK
 * does only for methods no handler could take, and our fallback handler (tools/call) takes every method.
 */
export const MODERN_REQUESTS: ReadonlySet<string> = new Set([
  "server/discover",
  "subscriptions/listen",
  "tools/list",
  "tools/call",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "tasks/get",
  "tasks/cancel",
  "tasks/update",
]);

/** One MCP server instance for one client in one era. */
export function createServer(ctx: ServerContext, era: Era): Server {
  const server = new ReplServer(
    { name: NAME, version: VERSION },
    {
      capabilities: CAPABILITIES[era],
      instructions: TRUST[ctx.contained ? "contained" : "trusted"] + INSTRUCTIONS,
    },
  );
  const stopResources = serveResources(server, ctx.sessions.artifacts, (id) => ctx.sessions.owns(id), {
    announce: era === "legacy",
  });
  server.onclose = stopResources;
  const { tasks } = ctx;

  // ttlMs/cacheScope tell clients (Claude Code) not to cache a catalogue that may differ per server; the
  // SDK adds them itself under 2026-07-28, and we keep sending them to legacy clients as before.
  /** The client's result style (styles/table.ts): by its name from initialize, or from each 2026 request. */
  const styleOf = (envelope: unknown): Style => {
    const info =
      era === "modern"
        ? ((envelope as Record<string, unknown> | undefined)?.[CLIENT_INFO_META_KEY] as
            | { name?: unknown }
            | undefined)
        : server.getClientVersion();
    const name = typeof info?.name === "string" ? info.name : undefined;
    return styleFor(ctx.resultStyle, name, era);
  };
  const revision = () => (era === "legacy" ? server.getNegotiatedProtocolVersion() : undefined);

  server.setRequestHandler("tools/list", async (_request, extra) => ({
    tools: listingFor(styleOf(extra.mcpReq.envelope).shape, revision()),
    ttlMs: 0,
    cacheScope: "private",
  }));

  // tools/call is served from the fallback handler on purpose: a handler registered for it would first
  // run the SDK's own request schema, which answers non-object arguments with -32603 and a schema dump.
  // Here every argument failure is the documented -32602 "Invalid arguments at <pointer>".
  server.fallbackRequestHandler = async (request, extra) => {
    if (request.method !== "tools/call") throw new MethodNotFound();
    const params = (request.params ?? {}) as CallParams;
    const tool = TOOLS.find((candidate) => candidate.name === params.name);
    if (!tool) throw new ProtocolError("Unknown tool");
    const style = styleOf(extra.mcpReq.envelope);
    const present: Present = (value) =>
      style.shape === "text" ? renderText(tool.name, value, era, style) : render(value);
    let bound: BoundCall;
    try {
      bound = tool.bind(params.arguments, era === "modern");
    } catch (error) {
      return failure(tool.name, error, present);
    }
    const token = extra.mcpReq._meta?.progressToken;
    const progress = progressForCall(token, (progress, message) => {
      const notification = { progressToken: token as string | number, progress, message };
      extra.mcpReq.notify({ method: "notifications/progress", params: notification }).catch(() => {});
    });
    const { plan } = bound;
    if (era === "legacy" && params.task && revision() === TASKS_REVISION) {
      if (!plan) throw new ProtocolError(`${tool.name} does not run as a task; call it without "task"`);
      // A 2025-11-25 task's progress token stays valid while it runs: reporting ends with the run.
      const asks = formsDeclared(server.getClientCapabilities());
      const taskId = await startTask(tasks, () => plan(ctx), params.task.ttl, progress, asks);
      return { task: tasks.legacyTask(taskId) };
    }
    if (era === "modern" && plan && takesTasks(extra.mcpReq.envelope)) {
      const asks = formsDeclared(capabilitiesOf(extra.mcpReq.envelope));
      return runMaybeAsTask(tasks, () => plan(ctx), progress, extra.mcpReq.signal, asks);
    }
    return answer(server, ctx, era, extra, { name: tool.name, bound, progress, present });
  };

  serveTasks(server, tasks, era, ctx.approvalTimeoutMs);
  return server;
}

/**
 * A call answered by its own response: under 2026-07-28, with input_required rounds while the person is
 * asked (when the client takes forms, or this is such a round's retry); under 2025-11-25, with
 * elicitation/create requests during the call.
 */
async function answer(
  server: Server,
  ctx: ServerContext,
  era: Era,
  extra: RequestContext,
  call: { name: string; bound: BoundCall; progress: CallProgress; present: Present },
) {
  const { name, bound, progress, present } = call;
  const requestState = extra.mcpReq.requestState();
  // A client forgets a call's progress token when it cancels the call: nothing more is reported for it,
  // even while the cell takes its grace to stop.
  extra.mcpReq.signal.addEventListener("abort", progress.stop, { once: true });
  try {
    if (
      era === "modern" &&
      (requestState !== undefined || formsDeclared(capabilitiesOf(extra.mcpReq.envelope)))
    ) {
      const served = await ctx.rounds.serve(
        name,
        requestState,
        extra.mcpReq.inputResponses,
        extra.mcpReq.signal,
        (signal, elicitation) =>
          bound.handle(ctx, { signal, onRun: progress.onRun, onWait: progress.onWait, elicitation }),
      );
      return "inputRequired" in served ? served.inputRequired : present(served.done);
    }
    const elicitation =
      era === "legacy" ? legacyElicitation(server, extra, ctx.approvalTimeoutMs) : undefined;
    return present(
      await bound.handle(ctx, {
        signal: extra.mcpReq.signal,
        onRun: progress.onRun,
        onWait: progress.onWait,
        elicitation,
      }),
    );
  } catch (error) {
    return failure(name, error, present);
  } finally {
    progress.stop();
  }
}

/** The task requests of each era's vocabulary (2025-11-25 tasks, or the 2026 extension). */
function serveTasks(server: Server, tasks: TaskBoard, era: Era, approvalTimeoutMs: number): void {
  if (era === "legacy") {
    server.setRequestHandler("tasks/get", { params: TaskId }, async ({ taskId }) => tasks.legacyTask(taskId));
    // While it waits, the run's questions go to the client as elicitations related to the task.
    server.setRequestHandler("tasks/result", { params: TaskId }, async ({ taskId }, extra) =>
      tasks.legacyResult(
        taskId,
        extra.mcpReq.signal,
        legacyElicitation(server, extra, approvalTimeoutMs, taskId),
      ),
    );
    server.setRequestHandler("tasks/list", { params: LegacyTaskList }, async (params) =>
      tasks.legacyList(params?.cursor),
    );
    server.setRequestHandler("tasks/cancel", { params: TaskId }, async ({ taskId }) =>
      tasks.legacyCancel(taskId),
    );
  } else {
    server.setRequestHandler("tasks/get", { params: TaskId }, async ({ taskId }) => tasks.detailed(taskId));
    server.setRequestHandler("tasks/cancel", { params: TaskId }, async ({ taskId }) =>
      tasks.modernCancel(taskId),
    );
    // The SDK lifts the answers out of the params into the request context.
    server.setRequestHandler("tasks/update", { params: TaskId }, async ({ taskId }, extra) =>
      tasks.update(taskId, extra.mcpReq.inputResponses ?? {}),
    );
  }
}

/**
 * A 2025-11-25 call can ask the person while it is in flight (elicitation/create), if its client
 * declared forms; the request outlives the question, whose own expiry decides.
 */
function legacyElicitation(
  server: Server,
  extra: RequestContext,
  approvalTimeoutMs: number,
  taskId?: string,
) {
  if (!formsDeclared(server.getClientCapabilities())) return undefined;
  const related = taskId === undefined ? {} : { _meta: { [RELATED_TASK_META_KEY]: { taskId } } };
  return elicitationChannel(
    // Related to the request that asks: over HTTP the form and its withdrawal then travel on that
    // request's own stream, which is open while it waits, not on the optional standalone stream (a
    // client without one would never see the form, nor learn that it was answered elsewhere).
    (form, options) =>
      extra.mcpReq.elicitInput({ ...form, ...related }, { ...options, relatedRequestId: extra.mcpReq.id }),
    approvalTimeoutMs + ELICITATION_MARGIN_MS,
  );
}

/** The client capabilities a 2026-07-28 request carries in its envelope. */
function capabilitiesOf(envelope: unknown) {
  return (envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] as
    | { extensions?: Record<string, unknown>; elicitation?: Record<string, unknown> }
    | undefined;
}

/** Whether a 2026-07-28 request's client capabilities include the tasks extension. */
function takesTasks(envelope: unknown): boolean {
  const extension = capabilitiesOf(envelope)?.extensions?.[TASKS_EXTENSION];
  return typeof extension === "object" && extension !== null;
}

/**
 * A 2026-07-28 call from a client that takes tasks: the run starts as a task; if it ends within
 * TASK_PROMOTE_AFTER_MS the call answers as a plain call would, otherwise with the task. Progress stops
 * with the response either way. A request cancelled before it is answered cancels its run.
 */
async function runMaybeAsTask(
  tasks: TaskBoard,
  plan: () => RunPlan | undefined,
  progress: CallProgress,
  signal: AbortSignal,
  asks: boolean,
) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  try {
    const taskId = await startTask(tasks, plan, undefined, progress, asks);
    onAbort = () => tasks.abandon(taskId);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    const later = new Promise<undefined>((resolve) => {
      timer = setTimeout(resolve, TASK_PROMOTE_AFTER_MS, undefined);
    });
    const finished = await Promise.race([tasks.done(taskId), later]);
    return finished ?? tasks.created(taskId);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
    progress.stop();
  }
}

/** A failed call: protocol errors stay JSON-RPC errors; everything else is an isError result with a code. */
type Present = (value: Record<string, unknown>) => ReturnType<typeof render> | ReturnType<typeof renderText>;

function failure(toolName: string, error: unknown, present: Present) {
  if (error instanceof ProtocolError) throw error;
  if (error instanceof ReplError) return present({ error: error.message, error_code: error.code });
  // Anything else is a bug of ours: say so to the agent, and keep the stack for whoever fixes it.
  log.error(`${toolName} failed unexpectedly:`, error);
  return present({ error: describe(error), error_code: "INTERNAL" });
}

/**
 * Plans and starts a task; a failure while planning (other than a protocol error) is a task that failed.
 * As for a plain call, a run still being cancelled in that session gets a moment to release the slot.
 */
async function startTask(
  tasks: TaskBoard,
  plan: () => RunPlan | undefined,
  ttlMs: number | undefined,
  progress: CallProgress,
  asks: boolean,
): Promise<string> {
  let planned: RunPlan | undefined;
  try {
    planned = plan();
  } catch (error) {
    if (error instanceof ProtocolError) throw error;
    if (!(error instanceof ReplError)) log.error("planning a task failed unexpectedly:", error);
    return tasks.failed({ error: describe(error), error_code: codeOf(error) }, ttlMs);
  }
  if (!planned) throw new ProtocolError("This tool does not run as a task");
  if (!planned.refusal) await planned.session.supervisor.settled();
  return tasks.start(planned, ttlMs, progress.onRun, asks);
}
