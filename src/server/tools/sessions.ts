// Independent sessions: open one on a project (and its interpreter), list, inspect and close them.
import * as v from "valibot";
import { ProtocolError } from "../../errors.ts";
import { KernelServerView, kernelServerView } from "../../kernels/config.ts";
import { INVENTORY_TIMEOUT_SECONDS, SESSION_NAME_MAX_BYTES, SESSIONS_MAX } from "../../limits.ts";
import { keepSeconds } from "../../parking/duration.ts";
import { SessionMetadata, sessionMetadata } from "../../sessions/metadata.ts";
import type { SessionScope } from "../../sessions/scope.ts";
import { Identity, RoutedFailure, SessionId, stamp, ToolFailure } from "./common.ts";
import { defineTool } from "./tool.ts";

const Inventory = v.object({
  variables: v.array(v.object({ name: v.string(), type: v.string(), length: v.optional(v.number()) })),
  total_namespace_entries: v.number(),
  omitted_including_helpers: v.number(),
  values_included: v.literal(false),
});
const Inspected = v.object({
  ...SessionMetadata.entries,
  namespace: v.optional(Inventory),
  /** Only with --kernels: the kernel servers, as python_session_list shows them. */
  kernel_servers: v.optional(v.array(KernelServerView)),
});

export const SessionList = v.object({
  server_id: v.string(),
  sessions: v.array(SessionMetadata),
  limit: v.number(),
  /** Only with --kernels: where python_session_open(kernel_server=...) can open a session. */
  kernel_servers: v.optional(v.array(KernelServerView)),
});

const PROJECT_REQUIRED =
  "Invalid arguments at /project: project is required for a local session (the project directory to " +
  "open it on); pass kernel_server instead to open the session on a Jupyter kernel";

/** python_session_open's answer: the session, and what became of a worker parked under its name. */
const Opened = v.object({
  ...SessionMetadata.entries,
  adopted: v.boolean(),
  /** An adopted worker's namespace is as its earlier server left it. */
  state: v.optional(v.literal("preserved")),
  /** A worker parked under this name could not come back: the session starts afresh, and why. */
  state_reset: v.optional(v.literal(true)),
  state_reset_reason: v.optional(v.string()),
});

export const pythonSessionOpen = defineTool({
  name: "python_session_open",
  description:
    "Open an independent session (own variables, worker, cwd, history and generation) on a project " +
    "directory: project is required for a local session (it is optional only with kernel_server). Interpreter: the python argument if given (absolute, relative to the project, or a name on " +
    "PATH), else <project>/.venv/bin/python when .venv exists, else the server default. The interpreter is " +
    "checked (CPython 3.10+) but the worker starts with the first run. Names are labels: opening the same " +
    "name twice gives two sessions. Pass the returned session_id to the other tools. kernel_server (one " +
    "of python_health's kernel_servers) runs the session on a Jupyter kernel there instead: a new one " +
    "(kernel: its kernelspec), or the running kernel_id (shared with whoever else uses it); project is " +
    "then a directory on the kernel's host and python does not apply. keep (e.g. \"8h\") keeps the session's " +
    "worker that long after this server exits (default: the server's --keep-sessions); opening the same name " +
    "and project later, in the next server, adopts it with its variables (adopted: true, same generation).",
  input: v.strictObject({
    name: v.pipe(
      v.string(),
      v.minLength(1),
      v.maxLength(SESSION_NAME_MAX_BYTES),
      v.maxBytes(SESSION_NAME_MAX_BYTES, `Session name must contain 1..${SESSION_NAME_MAX_BYTES} bytes`),
      v.description("A label"),
    ),
    project: v.optional(
      v.pipe(
        v.string(),
        v.minLength(1),
        v.description(
          "Project directory (relative: to the server's); required unless kernel_server is given, where " +
            "it is a directory on the kernel's host (default: the kernel's own)",
        ),
      ),
    ),
    python: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Interpreter to use"))),
    kernel_server: v.optional(
      v.pipe(v.string(), v.minLength(1), v.maxLength(64), v.description("A configured kernel server's name")),
    ),
    kernel: v.optional(
      v.pipe(
        v.string(),
        v.minLength(1),
        v.maxLength(128),
        v.description("Kernelspec to start (kernel_server)"),
      ),
    ),
    kernel_id: v.optional(
      v.pipe(
        v.string(),
        v.minLength(1),
        v.maxLength(128),
        v.description("A running kernel to attach to (kernel_server)"),
      ),
    ),
    keep: v.optional(
      v.pipe(
        v.string(),
        v.maxLength(32),
        v.description(
          'How long the session outlives this server, to be adopted by the next one: "90m", "8h", "7d" (at most the server\'s --keep-sessions-max); "0": not kept',
        ),
      ),
    ),
  }),
  output: v.union([Opened, ToolFailure]),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async handle(args, ctx, call) {
    const server = args.kernel_server;
    if (server === undefined) {
      if (args.kernel !== undefined || args.kernel_id !== undefined) {
        throw new ProtocolError(
          "kernel and kernel_id need kernel_server (a configured kernel server's name)",
        );
      }
      // The schema cannot say "required unless kernel_server" to every client, so the error does.
      if (args.project === undefined) throw new ProtocolError(PROJECT_REQUIRED);
    } else {
      if (args.python !== undefined) {
        throw new ProtocolError(
          "python cannot be combined with kernel_server: a kernel's Python is its kernelspec's",
        );
      }
      if (args.kernel !== undefined && args.kernel_id !== undefined) {
        throw new ProtocolError(
          "Give kernel (start a new kernel) or kernel_id (attach to a running one), not both",
        );
      }
    }
    const choice =
      server === undefined ? undefined : { server, kernel: args.kernel, kernelId: args.kernel_id };
    const keep = args.keep === undefined ? undefined : keepSeconds(args.keep, ctx.sessions.keepMaxSeconds);
    // A kernel on a cluster can take a minute to start: the client hears that it is being waited for.
    const what = args.kernel_id === undefined ? "starting a kernel" : "attaching to the kernel";
    const stopWaiting = choice ? call.onWait?.(() => `${what} on "${server}"`) : undefined;
    try {
      const session = await ctx.sessions.open(
        args.name,
        args.project,
        args.python,
        choice,
        call.signal,
        keep,
      );
      const arrival = session.arrival;
      return {
        ...sessionMetadata(session, ctx.maxMemoryMib),
        adopted: arrival?.adopted !== undefined,
        ...(arrival?.adopted ? { state: "preserved" as const } : {}),
        ...(arrival?.lost
          ? {
              state_reset: true as const,
              state_reset_reason: `A worker kept under this name could not come back: ${arrival.lost.reason}; the session starts afresh`,
            }
          : {}),
      };
    } finally {
      stopWaiting?.();
    }
  },
});

export const pythonSessionList = defineTool({
  name: "python_session_list",
  description:
    "List the open sessions with their ids, projects, environments and generations. Starts nothing.",
  input: v.strictObject({}),
  output: SessionList,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  async handle(_args, ctx) {
    return sessionList(ctx.sessions, ctx.maxMemoryMib);
  },
});

export function sessionList(sessions: SessionScope, maxMemoryMib: number): v.InferOutput<typeof SessionList> {
  return {
    server_id: sessions.serverId,
    sessions: sessions.list().map((session) => sessionMetadata(session, maxMemoryMib)),
    limit: SESSIONS_MAX,
    ...kernelServersOf(sessions),
  };
}

/** The configured kernel servers as the session tools show them: nothing without --kernels. */
function kernelServersOf(sessions: SessionScope) {
  const servers = sessions.kernelServers;
  return servers.length > 0 ? { kernel_servers: servers.map(kernelServerView) } : {};
}

export const pythonSessionInspect = defineTool({
  name: "python_session_inspect",
  description:
    "A session's metadata; with include_namespace=true also its variables' names, types and lengths — " +
    "never their values, and without running any of their code (no __repr__, no properties). The " +
    "inventory needs the session idle and may start its worker.",
  input: v.strictObject({
    session_id: v.optional(SessionId),
    include_namespace: v.optional(v.boolean(), false),
  }),
  output: v.union([Inspected, RoutedFailure]),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  async handle(args, ctx) {
    const session = ctx.sessions.route(args.session_id);
    const servers = kernelServersOf(ctx.sessions);
    if (!args.include_namespace) return { ...sessionMetadata(session, ctx.maxMemoryMib), ...servers };
    const result = await session.supervisor.execute({
      task: { kind: "inventory" },
      timeoutSeconds: INVENTORY_TIMEOUT_SECONDS,
      reset: false,
      record: false,
    });
    const namespace = v.safeParse(Inventory, result.namespace);
    if (!result.success || !namespace.success) {
      return stamp(session, {
        error: result.error ?? "Namespace inventory failed",
        error_code: result.error_code ?? "INTERNAL",
      });
    }
    return { ...sessionMetadata(session, ctx.maxMemoryMib), namespace: namespace.output, ...servers };
  },
});

export const pythonSessionClose = defineTool({
  name: "python_session_close",
  description:
    "Close a session: cancel its run, stop its worker and forget its state. The default session cannot be " +
    "closed (clear it with execute_python reset=true).",
  input: v.strictObject({ session_id: SessionId }),
  output: v.union([v.object({ closed: v.literal(true), ...Identity }), ToolFailure]),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async handle(args, ctx) {
    const session = await ctx.sessions.close(args.session_id);
    return {
      closed: true as const,
      server_id: session.serverId,
      session_id: session.id,
      generation: session.supervisor.generation,
    };
  },
});
