// The execution result every execution tool returns (docs/tools.md "execute_python"). The valibot schema is the single
// source of both the TypeScript type and the published output schema; it extends what the worker sends.
import * as v from "valibot";
import { ArtifactReference } from "../artifacts/reference.ts";
import { ErrorCodeName } from "../errors.ts";
import { CODE_MAX_BYTES, TIMEOUT_MAX_SECONDS, TIMEOUT_MIN_SECONDS } from "../limits.ts";
import { sizeText } from "../text/size.ts";
import { WorkerResult } from "./frames.ts";

const { interrupted: _interrupted, fatal: _fatal, error_code: _code, ...fromWorker } = WorkerResult.entries;

/** One display() or figure of a run; `inline` ones come as content blocks after the text block. */
export const Display = v.object({
  mime: v.string(),
  bytes: v.number(),
  inline: v.boolean(),
  text: v.optional(v.string()),
  /** Set when a display beyond the inline limits, or an archived picture, was kept as an artifact. */
  artifact: v.optional(ArtifactReference),
  /** A picture that was inline when its run ended; the run has since aged out of the newest few. */
  archived: v.optional(v.boolean()),
});
export type Display = v.InferOutput<typeof Display>;

export const ExecutionResult = v.object({
  run_id: v.string(),
  ...fromWorker,
  /** Null on success; otherwise what kind of failure `error` describes. */
  error_code: v.nullable(ErrorCodeName),
  elapsed_ms: v.number(),
  state_reset: v.boolean(),
  execution_mode: v.picklist(["persistent", "fresh"]),
  server_id: v.string(),
  session_id: v.string(),
  generation: v.number(),
  text_truncated: v.optional(v.boolean()),
  displays: v.optional(v.array(Display)),
});
/** Inline images keep their base64 data here until the result is rendered; it never reaches structuredContent. */
export type ExecutionResult = Omit<v.InferOutput<typeof ExecutionResult>, "displays"> & {
  displays?: Array<Display & { data?: string }>;
};

/** A refusal or loss the supervisor reports: its stable code and the message an agent acts on. */
export interface Failure {
  code: ErrorCodeName;
  message: string;
}

export const Failures = {
  limits: {
    code: "LIMIT_EXCEEDED",
    message: `Code limit is ${sizeText(CODE_MAX_BYTES)}; timeout must be ${TIMEOUT_MIN_SECONDS}..${TIMEOUT_MAX_SECONDS} seconds`,
  },
  frameLimit: {
    code: "LIMIT_EXCEEDED",
    message:
      "Cell exceeds the 1 MiB (1048576-byte) worker frame limit once JSON-encoded (control and other " +
      "escaped characters take up to 6 bytes each); nothing ran. Shorten the cell or read the data from a file",
  },
  busy: { code: "SESSION_BUSY", message: "A cell is already running; inspect python_run or cancel it" },
  closed: { code: "SESSION_CLOSED", message: "Session is closed" },
  staleGeneration: {
    code: "STATE_CHANGED",
    message: "STATE_CHANGED: stale expected_generation; inspect the session before executing",
  },
  restarted: {
    code: "STATE_CHANGED",
    message: "STATE_CHANGED: worker restarted; expected_generation no longer matches",
  },
  cancelledBeforeDispatch: { code: "CANCELLED", message: "Execution cancelled before dispatch" },
  crashed: { code: "WORKER_CRASHED", message: "Python worker crashed; variables cleared" },
  rss: { code: "MEMORY_LIMIT", message: "Python worker exceeded RSS budget; variables cleared" },
  timedOut: { code: "TIMEOUT", message: "Execution timed out" },
  cancelled: { code: "CANCELLED", message: "Execution cancelled" },
} as const satisfies Record<string, Failure>;

/** The two fields a failed result carries. */
export function failed(failure: Failure): { error: string; error_code: ErrorCodeName } {
  return { error: failure.message, error_code: failure.code };
}
