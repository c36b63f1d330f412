// The shape of one tool: its valibot input schema (the single source of the published JSON Schema and
// of the handler's argument type), its output schema, annotations, and the handler.
import type * as v from "valibot";
import type { Sessions } from "../../sessions/registry.ts";
import type { JsonSchema } from "../schema.ts";

export interface ServerContext {
  sessions: Sessions;
  maxMemoryMib: number;
}

export interface ToolCall {
  signal: AbortSignal;
}

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
}

/** Keeps the handler's argument type tied to the tool's own schema. */
export function defineTool<S extends v.GenericSchema>(tool: Tool<S>): Tool<S> {
  return tool;
}
