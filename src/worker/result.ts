// The execution result every execution tool returns (contract §1.2). The valibot schema is the single
// source of both the TypeScript type and the published output schema.
import * as v from "valibot";
import { ArtifactReference } from "../artifacts/reference.ts";

export const Truncated = v.object({
  stdout: v.boolean(),
  stderr: v.boolean(),
  return: v.boolean(),
  error: v.optional(v.boolean()),
});

export const ExecutionResult = v.object({
  run_id: v.string(),
  success: v.boolean(),
  stdout: v.string(),
  stderr: v.string(),
  return_value: v.nullable(v.string()),
  value: v.optional(v.unknown()),
  /** The whole trailing value, kept as an artifact because its preview was shortened. */
  artifact: v.optional(ArtifactReference),
  artifact_error: v.optional(v.string()),
  error: v.nullable(v.string()),
  elapsed_ms: v.number(),
  truncated: Truncated,
  state: v.picklist(["preserved", "cleared"]),
  state_reset: v.boolean(),
  execution_mode: v.picklist(["persistent", "fresh"]),
  server_id: v.string(),
  session_id: v.string(),
  generation: v.number(),
  background_tasks_cancelled: v.optional(v.number()),
  exit_code: v.optional(v.number()),
  namespace: v.optional(v.record(v.string(), v.unknown())),
  text_truncated: v.optional(v.boolean()),
});
export type ExecutionResult = v.InferOutput<typeof ExecutionResult>;

export const Messages = {
  limits: "Code limit is 256 KiB; timeout must be 0.01..3600 seconds",
  busy: "A cell is already running; inspect python_run or cancel it",
  closed: "Session is closed",
  staleGeneration: "STATE_CHANGED: stale expected_generation; inspect the session before executing",
  restarted: "STATE_CHANGED: worker restarted; expected_generation no longer matches",
  cancelledBeforeDispatch: "Execution cancelled before dispatch",
  crashed: "Python worker crashed; variables cleared",
  rss: "Python worker exceeded RSS budget; variables cleared",
  timedOut: "Execution timed out",
  cancelled: "Execution cancelled",
  abandoned: "Request abandoned; worker killed; external effects may already have occurred",
} as const;
