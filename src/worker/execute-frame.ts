// The frame that starts a run in the worker. It is encoded before any worker is touched: a cell within
// the 256 KiB code limit can still outgrow the 1 MiB frame once JSON escapes it (a control character
// becomes six bytes), and that must be a plain refusal, not a failure halfway through dispatch.
import { FRAME_MAX_BYTES } from "../limits.ts";
import { encodeFrame, FrameTooLargeError } from "../wire/lines.ts";
import type { RunTask } from "./run.ts";

/** The encoded execute frame, or undefined when it would not fit the frame limit (or the run has none: adopted). */
export function encodeExecuteFrame(
  runId: string,
  task: RunTask,
  timeoutSeconds: number,
): Uint8Array | undefined {
  if (task.kind === "adopted") return undefined;
  const base = { type: "execute", id: runId, timeout: timeoutSeconds };
  const frame =
    task.kind === "cell"
      ? { ...base, code: task.code }
      : task.kind === "file"
        ? { ...base, code: "", source_path: task.path, argv: task.argv }
        : task.kind === "history"
          ? { ...base, code: "", history: true }
          : { ...base, code: "", inventory: true };
  try {
    return encodeFrame(frame, FRAME_MAX_BYTES);
  } catch (error) {
    if (error instanceof FrameTooLargeError) return undefined;
    throw error;
  }
}
