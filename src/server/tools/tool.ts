// The shape of one tool: its valibot input schema (the single source of the published JSON Schema and
// of the handler's argument type), its output schema, annotations, and the handler.
import type * as v from "valibot";
import type { SessionScope } from "../../sessions/scope.ts";
import type { Session } from "../../sessions/session.ts";
import type { ExecutionResult } from "../../worker/result.ts";
import type { ActiveRun } from "../../worker/run.ts";
import type { RunRequest } from "../../worker/supervisor.ts";
import type { JsonSchema } from "../schema.ts";

export interface ServerContext {
  /** What this MCP client may see: its default session and the sessions it opened. */
  sessions: SessionScope;
  maxMemoryMib: number;
}

export interface ToolCall {
  signal: AbortSignal;
  /** Told about the run a call starts, once it holds the session's slot (progress reporting). */
  onRun?: (run: ActiveRun) => void;
}

/** What an execution tool would run, or the answer it gives without running anything. */
export type RunPlan =
  | { session: Session; request: Omit<RunRequest, "signal" | "onRun">; refusal?: undefined }
  | { session: Session; refusal: ExecutionResult };

export interface Annotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

export interface Tool<S extends v.GenericSchema = v.GenericSchema> {
  name: string;
  description: string;
  input: S;
  output: JsonSchema;
  annotations: Annotations;
  handle(args: v.InferOutput<S>, ctx: ServerContext, call: ToolCall): Promise<Record<string, unknown>>;
  /** Execution tools only: the run a call describes, so it can also start as an MCP task. */
  plan?(args: v.InferOutput<S>, ctx: ServerContext): RunPlan;
}

/** Keeps the handler's argument type tied to the tool's own schema. */
export function defineTool<S extends v.GenericSchema>(tool: Tool<S>): Tool<S> {
  return tool;
}
