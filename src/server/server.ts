// The MCP server: the SDK's low-level Server with our tool table, error model and result rendering.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  type JSONRPCRequest,
  ListTasksRequestSchema,
  ListToolsRequestSchema,
  type ProgressToken,
  type TaskCreationParams,
} from "@modelcontextprotocol/sdk/types.js";
import { codeOf, describe, ProtocolError, ReplError } from "../errors.ts";
import { log } from "../log.ts";
import { NAME, VERSION } from "../version.ts";
import { type CallProgress, progressForCall } from "./progress.ts";
import { render } from "./render.ts";
import { serveResources } from "./resources.ts";
import { StdioTransport } from "./stdio.ts";
import { TaskBoard } from "./tasks.ts";
import { TOOLS } from "./tools/index.ts";
import type { BoundCall, RunPlan, ServerContext } from "./tools/tool.ts";

const INSTRUCTIONS =
  "repl-mcp runs Python in a persistent local worker with full access to this machine: it is trusted " +
  "execution, not a sandbox. Variables and the asyncio loop persist between execute_python calls. Use " +
  "python_health for diagnostics (it never starts Python), python_start with python_run/python_cancel for " +
  "long work, and python_session_open for independent sessions on other projects. Inside cells, the mcp " +
  "helper calls tools of MCP servers the user configured for this broker only: mcp.call returns the full " +
  "result envelope and mcp.text extracts its text. A trailing value too large to preview is kept whole as " +
  "an artifact: read it in ranges with artifact_read, save it with artifact_save or send it to another " +
  "server with artifact_forward instead of printing it. A timeout or cancellation stops a cell, but " +
  "effects it already had on the outside world stay.";

const listing = TOOLS.map((tool) => ({
  name: tool.name,
  description: tool.description,
  inputSchema: tool.inputSchema,
  outputSchema: tool.outputSchema,
  annotations: tool.annotations,
  // Execution tools may also run as MCP tasks; the others answer quickly and stay plain calls.
  ...(tool.runsAsTask ? { execution: { taskSupport: "optional" as const } } : {}),
}));

const CAPABILITIES = {
  tools: { listChanged: false },
  resources: { listChanged: true },
  tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
};

class MethodNotFound extends Error {
  readonly code = ErrorCode.MethodNotFound;
  constructor() {
    super("Method not found");
  }
}

/** One MCP server for one client: stdio has one for the process, HTTP one per MCP session. */
export function createServer(ctx: ServerContext): Server {
  const server = new Server(
    { name: NAME, version: VERSION },
    { capabilities: CAPABILITIES, instructions: INSTRUCTIONS },
  );
  // The server closes with its client: stop hearing about the store then.
  server.onclose = serveResources(server, ctx.sessions.artifacts, (id) => ctx.sessions.owns(id));
  const tasks = new TaskBoard(render);

  // ttlMs/cacheScope tell clients (Claude Code) not to cache a catalogue that may differ per server.
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: listing,
    ttlMs: 0,
    cacheScope: "private",
  }));

  // tools/call is served from the fallback handler on purpose: a handler registered for it would first
  // run the SDK's own request schema, which answers non-object arguments with -32603 and a schema dump.
  // Here every argument failure is the documented -32602 "Invalid arguments at <pointer>".
  server.fallbackRequestHandler = async (request: JSONRPCRequest, extra) => {
    if (request.method !== "tools/call") throw new MethodNotFound();
    const params = (request.params ?? {}) as {
      name?: unknown;
      arguments?: unknown;
      task?: TaskCreationParams;
    };
    const tool = TOOLS.find((candidate) => candidate.name === params.name);
    if (!tool) throw new ProtocolError("Unknown tool");
    let bound: BoundCall;
    try {
      bound = tool.bind(params.arguments);
    } catch (error) {
      return failure(tool.name, error);
    }
    const token = extra._meta?.progressToken;
    const progress = progressForCall(token, (progress, message) => {
      const notification = { progressToken: token as ProgressToken, progress, message };
      extra.sendNotification({ method: "notifications/progress", params: notification }).catch(() => {});
    });
    if (params.task) {
      const { plan } = bound;
      if (!plan) throw new ProtocolError(`${tool.name} does not run as a task; call it without "task"`);
      return { task: startTask(tasks, () => plan(ctx), params.task.ttl, progress) };
    }
    try {
      return render(await bound.handle(ctx, { signal: extra.signal, onRun: progress.onRun }));
    } catch (error) {
      return failure(tool.name, error);
    } finally {
      progress.stop();
    }
  };

  server.setRequestHandler(GetTaskRequestSchema, async (request) => tasks.get(request.params.taskId));
  server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) =>
    tasks.result(request.params.taskId, extra.signal),
  );
  server.setRequestHandler(ListTasksRequestSchema, async (request) => tasks.list(request.params?.cursor));
  server.setRequestHandler(CancelTaskRequestSchema, async (request) => tasks.cancel(request.params.taskId));

  return server;
}

export async function serveStdio(ctx: ServerContext): Promise<void> {
  const server = createServer(ctx);
  const transport = new StdioTransport();
  const closed = new Promise<void>((resolve) => {
    const unsubscribe = server.onclose;
    server.onclose = () => {
      unsubscribe?.();
      resolve();
    };
  });
  await server.connect(transport);
  await closed;
}

/** A failed call: protocol errors stay JSON-RPC errors; everything else is an isError result with a code. */
function failure(toolName: string, error: unknown) {
  if (error instanceof ProtocolError) throw error;
  if (error instanceof ReplError) return render({ error: error.message, error_code: error.code });
  // Anything else is a bug of ours: say so to the agent, and keep the stack for whoever fixes it.
  log.error(`${toolName} failed unexpectedly:`, error);
  return render({ error: describe(error), error_code: "INTERNAL" });
}

/** Plans and starts a task; a failure while planning (other than a protocol error) is a failed task. */
function startTask(
  tasks: TaskBoard,
  plan: () => RunPlan | undefined,
  ttlMs: number | undefined,
  progress: CallProgress,
) {
  let planned: RunPlan | undefined;
  try {
    planned = plan();
  } catch (error) {
    if (error instanceof ProtocolError) throw error;
    if (!(error instanceof ReplError)) log.error("planning a task failed unexpectedly:", error);
    return tasks.failed({ error: describe(error), error_code: codeOf(error) }, ttlMs);
  }
  if (!planned) throw new ProtocolError("This tool does not run as a task");
  return tasks.start(planned, ttlMs, progress.onRun);
}
