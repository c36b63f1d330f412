// Bridge requests from a worker: only the active, uncancelled run may make them, at most 64 at a
// time. Each is served by the bridge function the session provides (the broker lives above us) and
// answered with an rpc_result that always fits in a frame.
import { codeOf, describe, type ErrorCodeName } from "../errors.ts";
import { FRAME_MAX_BYTES, RPC_CONCURRENCY } from "../limits.ts";
import { encodeFrame, FrameTooLargeError } from "../wire/lines.ts";
import type { WorkerChannel } from "./channel.ts";
import type { RpcFrame } from "./frames.ts";

export type Bridge = (
  op: string,
  params: Record<string, unknown>,
  /**
   * `workerPid`: the real pid of the Python process that asked. `extendWait`: the answer will take
   * that many seconds longer than the worker would wait (the person is being asked).
   */
  context: { runId: string; signal: AbortSignal; workerPid: number; extendWait: (seconds: number) => void },
) => Promise<unknown>;

export const REFUSED = "Too many outstanding MCP calls";
export const OVERSIZED =
  "MCP result exceeds IPC limit; call may have completed. Inspect mcp.journal(); do not blindly retry external writes.";
const NO_BROKER = "The MCP broker is not available in this server";

/** Why a request failed: its message for the cell, and the stable code a cell can branch on. */
interface Refusal {
  message: string;
  code: ErrorCodeName;
}

export class RpcDesk {
  private readonly outstanding = new Map<string, AbortController>();

  constructor(
    private readonly worker: WorkerChannel,
    private readonly bridge: Bridge | undefined,
  ) {}

  /** Serves one request if `runId` is the run allowed to make it. */
  handle(frame: RpcFrame, activeRunId: string | undefined, cancelled: boolean): void {
    if (
      frame.run_id !== activeRunId ||
      cancelled ||
      this.outstanding.size >= RPC_CONCURRENCY ||
      this.outstanding.has(frame.id)
    ) {
      this.answer(frame.id, null, { message: REFUSED, code: "LIMIT_EXCEEDED" });
      return;
    }
    const controller = new AbortController();
    this.outstanding.set(frame.id, controller);
    const work = this.bridge
      ? this.bridge(frame.op, frame.params, {
          runId: frame.run_id,
          signal: controller.signal,
          workerPid: this.worker.ready.pid,
          extendWait: (seconds) => {
            if (this.worker.alive)
              this.worker.send({ type: "rpc_wait", id: frame.id, seconds }).catch(() => {});
          },
        })
      : Promise.reject(new Error(NO_BROKER));
    work.then(
      (result) => this.settle(frame.id, controller, result ?? null, null),
      (error) => this.settle(frame.id, controller, null, { message: describe(error), code: codeOf(error) }),
    );
  }

  /** The worker gave up on one request: cancel it downstream; its late answer is not sent. */
  cancel(id: string): void {
    const controller = this.outstanding.get(id);
    if (!controller) return;
    this.outstanding.delete(id);
    controller.abort();
  }

  /** The run is cancelled or over: every request it still has is aborted. */
  abortAll(): void {
    for (const controller of this.outstanding.values()) controller.abort();
    this.outstanding.clear();
  }

  private settle(id: string, controller: AbortController, result: unknown, error: Refusal | null): void {
    if (this.outstanding.get(id) !== controller) return;
    this.outstanding.delete(id);
    this.answer(id, result, error);
  }

  private answer(id: string, result: unknown, error: Refusal | null): void {
    if (!this.worker.alive) return;
    let bytes: Uint8Array;
    try {
      bytes = encodeFrame(
        {
          type: "rpc_result",
          id,
          result,
          error: error?.message ?? null,
          ...(error ? { error_code: error.code } : {}),
        },
        FRAME_MAX_BYTES,
      );
    } catch (failure) {
      if (!(failure instanceof FrameTooLargeError)) throw failure;
      bytes = encodeFrame(
        { type: "rpc_result", id, result: null, error: OVERSIZED, error_code: "LIMIT_EXCEEDED" },
        FRAME_MAX_BYTES,
      );
    }
    // A worker that stopped reading is killed by the writer; there is nobody left to tell.
    this.worker.sendEncoded(bytes).catch(() => {});
  }
}
