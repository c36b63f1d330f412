// The shape of one tool: a valibot input schema (the single source of the published inputSchema and of
// the handler's argument type), a valibot output schema (the single source of the published
// outputSchema and of the handler's return type), annotations, and the handler. defineTool erases the
// two schema types into a ListedTool, so the tool table needs no casts.
import type * as v from "valibot";
import { ProtocolError } from "../../errors.ts";
import type { Channel } from "../../person/questions.ts";
import type { SessionScope } from "../../sessions/scope.ts";
import type { ActiveRun } from "../../worker/run.ts";
import type { InputRounds } from "../input-rounds.ts";
import type { RunPlan } from "../run-plan.ts";
import { type JsonSchema, jsonSchemaOf, outputSchemaOf, parseArguments } from "../schema.ts";
import type { ResultStyleSetting } from "../styles/table.ts";
import type { TaskBoard } from "../tasks.ts";

/** What the command line sets for every client alike. */
export interface ClientSettings {
  maxMemoryMib: number;
  /** The --result-style setting; "auto" looks the client up in styles/table.ts. */
  resultStyle: ResultStyleSetting;
  /** --approval-timeout-s, in ms: how long a question to the person may wait. */
  approvalTimeoutMs: number;
  /** --sandbox: local workers run contained (the instructions say so). */
  contained?: boolean;
}

/** One MCP client's world, shared by every server instance that serves it (one per HTTP request in 2026). */
export interface ServerContext extends ClientSettings {
  /** What this MCP client may see: its default session and the sessions it opened. */
  sessions: SessionScope;
  /** Its MCP tasks (their ids are run ids of its sessions). */
  tasks: TaskBoard;
  /** Its 2026-07-28 calls parked while the person is asked. */
  rounds: InputRounds;
}

/** A3 of the error model: under a stateless revision nothing says which session an unnamed cell meant. */
export const SESSION_ID_REQUIRED =
  "Pass session_id from python_health or python_session_open to reference persistent state";

export interface ToolCall {
  signal: AbortSignal;
  /** Told about the run a call starts, once it holds the session's slot (progress reporting). */
  onRun?: (run: ActiveRun) => void;
  /** Reports a long wait that is not a run (progress); returns the way to stop reporting it. */
  onWait?: (describe: () => string) => () => void;
  /** Present when this call's client can answer forms: the person can be asked during the call. */
  elicitation?: Channel;
}

export interface Annotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/** What every tool returns: a JSON object, rendered into the CallToolResult by ../render.ts. */
export type Structured = Record<string, unknown>;
type ObjectSchema = v.GenericSchema<unknown, Structured>;

export interface Tool<I extends v.GenericSchema, O extends ObjectSchema> {
  name: string;
  description: string;
  input: I;
  output: O;
  annotations: Annotations;
  /** Refuse to run without an explicit session_id under 2026-07-28 (execute_python, python_start). */
  sessionRequiredWhenStateless?: true;
  handle(args: v.InferOutput<I>, ctx: ServerContext, call: ToolCall): Promise<v.InferOutput<O>>;
  /** Execution tools only: the run a call describes, so it can also start as an MCP task. */
  plan?(args: v.InferOutput<I>, ctx: ServerContext): RunPlan;
}

/** One call's arguments, validated, bound to its tool. */
export interface BoundCall {
  handle(ctx: ServerContext, call: ToolCall): Promise<Structured>;
  plan?(ctx: ServerContext): RunPlan;
}

/** A tool as the server lists and calls it. */
export interface ListedTool {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema;
  annotations: Annotations;
  /** Whether it may also run as an MCP task. */
  runsAsTask: boolean;
  /**
   * Validates raw arguments (a ProtocolError, or a LIMIT_EXCEEDED ReplError for a byte limit). `stateless`:
   * the call came under 2026-07-28, where some tools need a session_id (SESSION_ID_REQUIRED).
   */
  bind(args: unknown, stateless: boolean): BoundCall;
}

export function defineTool<I extends v.GenericSchema, O extends ObjectSchema>(tool: Tool<I, O>): ListedTool {
  const { plan } = tool;
  return {
    name: tool.name,
    description: tool.description,
    inputSchema: jsonSchemaOf(tool.input),
    outputSchema: outputSchemaOf(tool.output),
    annotations: tool.annotations,
    runsAsTask: plan !== undefined,
    bind(raw, stateless) {
      const args = parseArguments(tool.input, raw);
      if (
        stateless &&
        tool.sessionRequiredWhenStateless &&
        (args as { session_id?: unknown }).session_id === undefined
      ) {
        throw new ProtocolError(SESSION_ID_REQUIRED);
      }
      return {
        handle: (ctx, call) => tool.handle(args, ctx, call),
        plan: plan && ((ctx) => plan(args, ctx)),
      };
    },
  };
}
