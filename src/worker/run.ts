// One execution attempt while it holds a session's slot: what it is, how far it got, its live output,
// and the switch that cancels it. The supervisor drives it; tools only read it or pull the switch.
import { LIVE_STREAM_MAX_BYTES, PROGRESS_OUTPUT_MAX_BYTES, PROGRESS_TAIL_MAX_BYTES } from "../limits.ts";
import { Questions } from "../person/questions.ts";
import { cutUtf8, tailUtf8, utf8Bytes } from "../text/utf8.ts";
import { Displays } from "./displays.ts";
import type { ExecutionResult, Failure } from "./result.ts";

export type RunTask =
  | { kind: "cell"; code: string }
  | { kind: "file"; path: string; argv: string[]; mode: "persistent" | "fresh" }
  | { kind: "inventory" }
  /** The retained sources of the worker's runs (repl_history), for the viewer of an adopted session. */
  | { kind: "history" }
  /** A cell an earlier server started in a worker this server adopted (docs/sessions.md). */
  | { kind: "adopted" };

export class ActiveRun {
  readonly id: string;
  readonly startedAt: number;
  status: "starting" | "running" = "starting";
  readonly live = { stdout: "", stderr: "" };
  readonly displays = new Displays();
  /** What the run is asking the person (approvals, input()), and the channels that can reach them. */
  readonly questions = new Questions();
  private readonly liveBytes = { stdout: 0, stderr: 0 };
  /** The newest output of both streams, kept even after the live buffers are full. */
  private tail = "";
  /** Told about every piece of output (progress reporting, the viewer); they must not throw. */
  readonly outputListeners = new Set<(stream: "stdout" | "stderr", text: string) => void>();
  /** Set once; the first reason wins (a timeout racing a cancel reports the timeout). */
  cancelReason: Failure | undefined;
  private readonly controller = new AbortController();
  /** Settles with the final result; assigned by the supervisor when the run starts. */
  done!: Promise<ExecutionResult>;
  /** Native stderr captured so far by the worker this run is on (persistent or fresh). */
  nativeStderr: () => string = () => "";

  /**
   * `adopted`: the id, start and (if it ended while parked) end, in ms since the epoch, of a run an
   * earlier server started.
   */
  constructor(
    readonly task: RunTask,
    adopted?: { id: string; startedAt: number; endedAt?: number },
  ) {
    this.id = adopted?.id ?? crypto.randomUUID();
    const now = performance.now();
    this.startedAt = adopted ? now - Math.max(0, Date.now() - adopted.startedAt) : now;
    if (adopted?.endedAt !== undefined) this.endedAt = now - Math.max(0, Date.now() - adopted.endedAt);
  }

  /** Where its clock stopped, for a run that ended before this server saw it (adopted while parked). */
  private endedAt: number | undefined;

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  cancel(reason: Failure): void {
    if (this.cancelReason) return;
    this.cancelReason = reason;
    this.controller.abort();
  }

  appendOutput(stream: "stdout" | "stderr", text: string): void {
    this.tail = tailUtf8(this.tail + text, PROGRESS_TAIL_MAX_BYTES);
    for (const listener of this.outputListeners) listener(stream, text);
    const room = LIVE_STREAM_MAX_BYTES - this.liveBytes[stream];
    if (room <= 0) return;
    const piece = cutUtf8(text, room).text;
    this.live[stream] += piece;
    this.liveBytes[stream] += utf8Bytes(piece);
  }

  /** One short line for people watching: elapsed seconds and the newest one or two lines of output. */
  statusMessage(): string {
    const seconds = (this.elapsedMs() / 1000).toFixed(1);
    const lines = this.tail.replace(/\s+$/, "").split("\n").slice(-2).join("\n");
    const newest = tailUtf8(lines, PROGRESS_OUTPUT_MAX_BYTES);
    const waiting = this.questions.describeWaiting();
    const state = this.cancelReason
      ? "stopping"
      : waiting
        ? `waiting for the person: ${waiting}`
        : this.status;
    return newest
      ? `${state}, ${seconds} s; newest output:\n${newest}`
      : `${state}, ${seconds} s; no output yet`;
  }

  elapsedMs(): number {
    return Math.round(((this.endedAt ?? performance.now()) - this.startedAt) * 1000) / 1000;
  }
}
