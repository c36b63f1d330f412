// A kept session's worker as the supervisor sees it (docs/architecture.md, "Parking"): the same frames as
// any worker, carried over the keeping guardian's socket, which relays them to and from the worker's
// pipes. This server either started it (through a KeptGuardian, its own child) or adopted it from a
// server that went (by proving the parking secret to the guardian). Letting it go (`park`) closes the
// connection without asking for an end, and the guardian keeps the worker for the next server.

import * as v from "valibot";
import { ReplError } from "../errors.ts";
import { signalGroup } from "../guardian/kill.ts";
import { KeptGuardian } from "../guardian/spawn.ts";
import {
  FRAME_MAX_BYTES,
  FRAME_WRITE_TIMEOUT_MS,
  KEEPER_END_MARGIN_MS,
  WORKER_EXIT_WAIT_MS,
  WORKER_READY_TIMEOUT_MS,
} from "../limits.ts";
import { log } from "../log.ts";
import { type Adopted, KeeperLink, KeeperRefused } from "../parking/link.ts";
import { forget } from "../parking/lookup.ts";
import { socketPath } from "../parking/place.ts";
import { GUARDIAN_LINE_PREFIX } from "../parking/protocol.ts";
import { recordBase } from "../parking/record.ts";
import { waitAtMost, withTimeout } from "../timeout.ts";
import { decodeLine, encodeFrame } from "../wire/lines.ts";
import type { CloseReason, Handover, WorkerChannel } from "./channel.ts";
import { parseWorkerFrame, ReadyFrame, type WorkerFrame } from "./frames.ts";
import { hostPidOf } from "./namespace-pid.ts";
import { NativeStderr } from "./native-stderr.ts";
import { type WorkerLaunch, workerSpec } from "./process.ts";
import type { Failure } from "./result.ts";
import { residentBytes } from "./rss.ts";

const encoder = new TextEncoder();
const PREFIX = encoder.encode(GUARDIAN_LINE_PREFIX);

export class KeptWorker implements WorkerChannel {
  readonly stderr = new NativeStderr();
  onFrame: (frame: WorkerFrame) => void = () => {};
  readonly closed: Promise<CloseReason>;
  ready: ReadyFrame;
  /** The guardian's pid: the group of the guardian and the worker. */
  readonly pgid: number;
  private closeReason: CloseReason | undefined;
  private readonly jobs = new Set<number>();
  private readonly closeListeners = new Set<() => void>();
  private channelClosed = false;
  private letGo = false;
  /**
   * A contained worker (docs/sandbox.md) lives in pid namespaces of its own: its ready pid is replaced by
   * its host pid, SIGINT goes to it alone, and the groups it reports are never signalled from out here.
   */
  private readonly contained: boolean;
  /** Why the worker was lost, when the server stopped it for a reason of its own (the sandbox's). */
  loss: Failure | undefined;

  private constructor(
    private readonly link: KeeperLink,
    /** What the guardian said when it handed the worker over (its generation, since when it was parked, ...). */
    readonly handover: Adopted,
    /** Set when this server started the worker: the guardian is its child. */
    private readonly guardian: KeptGuardian | undefined,
  ) {
    this.ready = v.parse(ReadyFrame, handover.ready);
    const pgid = handover.pgid;
    this.pgid = pgid;
    this.contained = handover.containment !== undefined;
    if (this.contained) {
      const pid = hostPidOf(pgid, this.ready.pid);
      if (pid === undefined) throw new Error("cannot find the contained worker's process");
      this.ready = { ...this.ready, pid };
    }
    this.closed = (async () => {
      await link.closed;
      this.stderr.finish();
      if (!this.letGo) {
        // A guardian that ended its worker is gone with its group; one that failed is made sure of.
        signalGroup(pgid, "SIGKILL");
        if (this.guardian) await this.guardian.exited;
      }
      return this.closeReason ?? "exited";
    })();
    void this.closed.then(() => {
      this.channelClosed = true;
      for (const listener of this.closeListeners) listener();
      this.closeListeners.clear();
    });
  }

  /** Starts a worker under a keeping guardian and takes it over as its first holder. */
  static async start(launch: WorkerLaunch, generation: number): Promise<KeptWorker> {
    const keep = launch.keep;
    if (!keep) throw new Error("a kept worker needs launch.keep");
    const { spec, contained } = await workerSpec(launch);
    const record = contained ? { containment: contained.record } : {};
    const guardian = new KeptGuardian(spec, { ...keep, ...record, generation, holder_pid: process.pid });
    const started = (async () => {
      await guardian.childPid;
      const path = socketPath(keep.dir, recordBase(keep.key, guardian.pgid));
      const { link, answer } = await KeeperLink.open(path, keep.secret, { adopt: process.pid });
      if (answer.guardian !== "adopted") throw new Error("the guardian did not hand the worker over");
      return new KeptWorker(link, answer, guardian);
    })();
    const exited = guardian.exited.then((): never => {
      throw new ReplError("WORKER_START_FAILED", "Python worker exited during startup");
    });
    try {
      const worker = await withTimeout(Promise.race([started, exited]), WORKER_READY_TIMEOUT_MS, () => {
        throw new ReplError("WORKER_START_FAILED", "Python worker startup timed out");
      });
      worker.begin();
      if (contained) {
        worker.whenGone(() => contained.release());
        contained.onBreach((why) => worker.lose({ code: "WORKER_CRASHED", message: why }));
      }
      return worker;
    } catch (error) {
      contained?.release();
      guardian.signal("SIGKILL");
      guardian.closeControl();
      await guardian.exited;
      // Killed before it could say goodbye: nothing of it may look like a parked worker.
      forget(keep.dir, {
        key: keep.key,
        guardian_pid: guardian.pgid,
        socket: socketPath(keep.dir, recordBase(keep.key, guardian.pgid)),
      });
      if (error instanceof ReplError) throw error;
      throw new ReplError("WORKER_START_FAILED", (error as Error).message, { cause: error });
    }
  }

  /**
   * Takes over a parked worker through its guardian's socket. Frames it kept are delivered once the
   * caller calls `begin()` (after it is ready for them). Throws KeeperRefused.
   */
  static async adopt(socket: string, secret: string): Promise<KeptWorker> {
    const { link, answer } = await KeeperLink.open(socket, secret, { adopt: process.pid });
    if (answer.guardian !== "adopted") {
      link.close();
      throw new KeeperRefused("BAD_REQUEST", "the guardian did not hand the worker over");
    }
    try {
      return new KeptWorker(link, answer, undefined);
    } catch (error) {
      link.close();
      throw new KeeperRefused(
        "BAD_REQUEST",
        `the worker's ready frame is malformed (${(error as Error).message})`,
      );
    }
  }

  /** What the supervisor takes over with this worker. */
  handoverInfo(): Handover {
    return {
      generation: this.handover.generation,
      running: this.handover.running,
      begin: () => this.begin(),
      ...(this.handover.containment === undefined ? {} : { containment: this.handover.containment }),
      whenGone: (fn) => this.whenGone(fn),
    };
  }

  /** Starts delivering frames (the kept ones first). */
  begin(): void {
    this.link.listen((line) => this.line(line));
  }

  onClose(fn: () => void): () => void {
    if (this.channelClosed) {
      queueMicrotask(fn);
      return () => {};
    }
    this.closeListeners.add(fn);
    return () => this.closeListeners.delete(fn);
  }

  get alive(): boolean {
    return this.closeReason === undefined && this.link.alive;
  }

  send(frame: unknown): Promise<void> {
    let bytes: Uint8Array;
    try {
      bytes = encodeFrame(frame, FRAME_MAX_BYTES);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.sendEncoded(bytes);
  }

  sendEncoded(bytes: Uint8Array): Promise<void> {
    if (!this.alive) return Promise.reject(new ReplError("WORKER_CRASHED", "Python worker is not running"));
    return withTimeout(this.link.write(bytes), FRAME_WRITE_TIMEOUT_MS, () => {
      log.warn("kept worker's input stalled; killing the worker");
      void this.kill("broken");
      throw new Error(`worker input stayed full for ${FRAME_WRITE_TIMEOUT_MS / 1000} s`);
    });
  }

  killJobs(): void {
    for (const pgid of this.jobs) signalGroup(pgid, "SIGKILL");
  }

  /** Kills it, saying why: a run in flight ends with this failure. */
  lose(loss: Failure): void {
    this.loss ??= loss;
    void this.kill("killed");
  }

  /** Calls fn once the worker is gone for good in this server's time: not when it is let go (parked). */
  whenGone(fn: () => void): void {
    void this.closed.then(() => {
      if (!this.letGo) fn();
    });
  }

  interrupt(): void {
    if (this.contained) {
      try {
        process.kill(this.ready.pid, "SIGINT");
      } catch {}
      return;
    }
    // The guardian ignores SIGINT; the worker raises KeyboardInterrupt.
    signalGroup(this.pgid, "SIGINT");
  }

  residentBytes(): number | undefined {
    return residentBytes(this.ready.pid);
  }

  /** Ends the worker now: the guardian kills it, its jobs and its cleanup; its group is killed if it does not. */
  async kill(reason: CloseReason = "killed"): Promise<void> {
    // Let go of: the worker is its guardian's now, parked for the next server.
    if (this.letGo) return;
    this.closeReason ??= reason;
    this.killJobs();
    await this.end(0);
  }

  /** Asks the worker to leave (stdin EOF, then SIGTERM, then SIGKILL, run by its guardian). */
  async stop(): Promise<void> {
    if (this.letGo) return;
    this.closeReason ??= "killed";
    await this.end(WORKER_EXIT_WAIT_MS);
    this.killJobs();
  }

  /** Lets go of the worker: the guardian parks it for the next server. */
  async park(): Promise<void> {
    if (this.channelClosed) return;
    this.letGo = true;
    this.closeReason ??= "exited";
    this.link.close();
    this.guardian?.release();
    await this.closed;
  }

  private async end(graceMs: number): Promise<void> {
    if (this.link.alive) {
      this.link
        .write(encoder.encode(`${JSON.stringify({ guardian: "end", grace_ms: graceMs })}\n`))
        .catch(() => {});
      await waitAtMost(this.link.closed, graceMs + KEEPER_END_MARGIN_MS);
    }
    if (this.link.alive) {
      signalGroup(this.pgid, "SIGKILL");
      this.link.close();
    }
    await this.closed;
  }

  private line(line: Uint8Array): void {
    if (startsWith(line, PREFIX)) {
      this.guardianLine(line);
      return;
    }
    let frame: WorkerFrame | undefined;
    try {
      frame = parseWorkerFrame(JSON.parse(decodeLine(line)));
    } catch (error) {
      log.debug("kept worker channel broken:", (error as Error).message);
      void this.kill("broken");
      return;
    }
    if (!frame) return;
    if (frame.type === "job") {
      if (frame.pid <= 1 || this.contained) return;
      if (frame.action === "started") this.jobs.add(frame.pid);
      else this.jobs.delete(frame.pid);
      return;
    }
    if (frame.type === "ready") return;
    this.onFrame(frame);
  }

  private guardianLine(line: Uint8Array): void {
    try {
      const message = JSON.parse(decodeLine(line)) as { guardian?: string; data?: string };
      if (message.guardian === "stderr" && typeof message.data === "string") {
        this.stderr.feed(Buffer.from(message.data, "base64"));
      }
    } catch {
      // Not a line of ours to act on.
    }
  }
}

function startsWith(line: Uint8Array, prefix: Uint8Array): boolean {
  if (line.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (line[i] !== prefix[i]) return false;
  return true;
}
