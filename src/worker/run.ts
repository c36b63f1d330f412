// One execution attempt while it holds a session's slot: what it is, how far it got, its live output,
// and the switch that cancels it. The supervisor drives it; tools only read it or pull the switch.
import { randomUUID } from "node:crypto";
import { LIVE_STREAM_MAX_BYTES } from "../limits.ts";
import { cutUtf8, utf8Bytes } from "../text/utf8.ts";
import type { ExecutionResult } from "./result.ts";

export type RunTask =
  | { kind: "cell"; code: string }
  | { kind: "file"; path: string; argv: string[]; mode: "persistent" | "fresh" }
  | { kind: "inventory" };

export class ActiveRun {
  readonly id = randomUUID();
  readonly startedAt = performance.now();
  status: "starting" | "running" = "starting";
  readonly live = { stdout: "", stderr: "" };
  private readonly liveBytes = { stdout: 0, stderr: 0 };
  /** Set once; the first reason wins (a timeout racing a cancel reports the timeout). */
  cancelReason: string | undefined;
  private readonly controller = new AbortController();
  /** Settles with the final result; assigned by the supervisor when the run starts. */
  done!: Promise<ExecutionResult>;
  /** Native stderr captured so far by the worker this run is on (persistent or fresh). */
  nativeStderr: () => string = () => "";

  constructor(readonly task: RunTask) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  cancel(reason: string): void {
    if (this.cancelReason) return;
    this.cancelReason = reason;
    this.controller.abort();
  }

  appendOutput(stream: "stdout" | "stderr", text: string): void {
    const room = LIVE_STREAM_MAX_BYTES - this.liveBytes[stream];
    if (room <= 0) return;
    const piece = cutUtf8(text, room).text;
    this.live[stream] += piece;
    this.liveBytes[stream] += utf8Bytes(piece);
  }

  elapsedMs(): number {
    return Math.round((performance.now() - this.startedAt) * 1000) / 1000;
  }
}
