// What an execution tool would run, or the answer it gives without running anything: the tool table
// builds it, and both a plain call and an MCP task (tasks.ts) carry it out.
import type { Session } from "../sessions/session.ts";
import type { ExecutionResult } from "../worker/result.ts";
import type { RunRequest } from "../worker/supervisor.ts";

export type RunPlan =
  | { session: Session; request: Omit<RunRequest, "signal" | "onRun">; refusal?: undefined }
  | { session: Session; refusal: ExecutionResult };
