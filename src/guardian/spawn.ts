// Starting a child through a guardian. The guardian is this same binary in its hidden mode, in a new
// session (so it leads its own process group); the spec goes through a private pipe, never argv.
import { closeSync, writeSync } from "node:fs";
import type { FileSink } from "bun";
import * as v from "valibot";
import { isCompiled } from "../binary.ts";
import { FRAME_MAX_BYTES, GUARDIAN_CONTROL_WRITE_TIMEOUT_MS } from "../limits.ts";
import { log } from "../log.ts";
import { withTimeout } from "../timeout.ts";
import { decodeLine, readLines } from "../wire/lines.ts";
import { inheritableEnv } from "./env.ts";
import { GUARDIAN_FLAG } from "./flag.ts";
import { signalGroup } from "./kill.ts";
import { GuardianEvent, type KeepSpec, type SpawnSpec } from "./protocol.ts";

function guardianCommand(): string[] {
  // A compiled binary runs its embedded entry from a virtual path; from a checkout, bun needs the script.
  const self = isCompiled()
    ? [process.execPath]
    : [process.execPath, new URL("../main.ts", import.meta.url).pathname];
  return [...self, GUARDIAN_FLAG, "0"];
}

/**
 * JavaScriptCore options for the guardian alone. It runs a few lines of JavaScript and then waits, so
 * the interpreter serves it as well as a JIT would, for 0.5 MiB less memory per guardian, no compiler
 * thread and a slightly faster start. They are in the guardian's own environment only: the child gets
 * exactly the environment of its spec.
 */
const GUARDIAN_ENV = { BUN_JSC_useJIT: "0" };

/**
 * A keeping guardian may sit parked for days: Bun's periodic garbage-collection timer would wake it
 * (and the allocator's scavenger after it) several times a second for nothing. Without the timer a
 * parked guardian takes no CPU at all; collections still happen when it allocates.
 */
const KEEPER_ENV = { ...GUARDIAN_ENV, BUN_GC_TIMER_DISABLE: "1" };

export interface ChildExit {
  code: number | null;
  signal: string | null;
}

/**
 * A guardian as the server holds it: its process group, its control and event fds, and the child's pid
 * and exit as it reports them. GuardedProcess adds the child's pipes; a kept worker's guardian
 * (KeptGuardian) holds those itself.
 */
class GuardianLink {
  /** The guardian's pid, which is also the group id of the guardian and the child. */
  readonly pgid: number;
  /** Resolves with the child's pid once the guardian started it; rejects if it could not. */
  readonly childPid: Promise<number>;
  /** Resolves when the guardian is gone (and with it the whole group). */
  readonly exited: Promise<ChildExit | null>;
  protected readonly proc: ReturnType<typeof Bun.spawn>;
  private controlFd: number | undefined;
  /** Control lines are written one after another, in order. */
  private control: Promise<void> = Promise.resolve();
  private rejectPid: (error: Error) => void = () => {};

  protected constructor(
    stdio: ["pipe" | "ignore", "pipe" | "ignore", "pipe" | "ignore"],
    spawn: Record<string, unknown>,
    ownEnv: Record<string, string> = GUARDIAN_ENV,
  ) {
    const proc = Bun.spawn(guardianCommand(), {
      stdio: [...stdio, "pipe", "pipe"],
      detached: true,
      env: { ...inheritableEnv(), ...ownEnv },
    });
    this.proc = proc;
    this.pgid = proc.pid;
    const controlFd = proc.stdio[3] as unknown as number;
    const eventFd = proc.stdio[4] as unknown as number;
    this.controlFd = controlFd;

    let childExit: ChildExit | null = null;
    let resolvePid!: (pid: number) => void;
    let rejectPid!: (error: Error) => void;
    this.childPid = new Promise((resolve, reject) => {
      resolvePid = resolve;
      rejectPid = reject;
    });
    this.rejectPid = rejectPid;
    this.childPid.catch(() => {});
    const events = readLines(Bun.file(eventFd).stream(), FRAME_MAX_BYTES, (line) => {
      const parsed = v.safeParse(GuardianEvent, JSON.parse(decodeLine(line)));
      if (!parsed.success) return;
      const event = parsed.output;
      if (event.type === "spawned") resolvePid(event.pid);
      else if (event.type === "exit") childExit = { code: event.code, signal: event.signal };
      else rejectPid(new Error(event.message));
    }).catch((error) => log.debug("guardian events ended", error));

    this.exited = proc.exited.then(async () => {
      // A guardian killed from outside cannot clean up after itself; make sure its group is gone.
      if (!this.released) signalGroup(this.pgid, "SIGKILL");
      await events;
      try {
        closeSync(eventFd);
      } catch {}
      rejectPid(new Error("guardian exited before starting the child"));
      this.closeControl();
      return childExit;
    });

    this.sendControl({ type: "spawn", ...spawn });
  }

  /** Set when the server lets a kept worker's guardian go: its group is then no longer ours to kill. */
  protected released = false;

  registerJob(pgid: number): void {
    this.sendControl({ type: "job", pgid });
  }

  jobFinished(pgid: number): void {
    this.sendControl({ type: "job_done", pgid });
  }

  signal(signal: NodeJS.Signals): void {
    signalGroup(this.pgid, signal);
  }

  /** Cuts the lifeline: the guardian kills the child and its group, then exits. */
  closeControl(): void {
    if (this.controlFd === undefined) return;
    try {
      closeSync(this.controlFd);
    } catch {}
    this.controlFd = undefined;
  }

  /**
   * Queues one control line. Lines go out in order, each whole, without ever blocking the event loop:
   * a guardian that takes none of a line within the deadline is useless, so it is ended (and anything
   * it started) and whoever waits on `childPid` hears why.
   */
  protected sendControl(message: unknown): void {
    const bytes = Buffer.from(`${JSON.stringify(message)}\n`);
    this.control = this.control.then(async () => {
      try {
        await this.writeControl(bytes, Date.now() + GUARDIAN_CONTROL_WRITE_TIMEOUT_MS);
      } catch (error) {
        log.debug("guardian control write failed", error);
        this.rejectPid(new Error(describeControlFailure(error)));
        this.signal("SIGKILL");
        this.closeControl();
      }
    });
  }

  /** Writes every byte to the socket Bun opened non-blocking, yielding to the event loop while it is full. */
  private async writeControl(bytes: Buffer, deadline: number): Promise<void> {
    let offset = 0;
    let pauseMs = 1;
    while (offset < bytes.length) {
      const fd = this.controlFd;
      if (fd === undefined) throw new Error("guardian control channel is closed");
      try {
        offset += writeSync(fd, bytes, offset, bytes.length - offset);
        pauseMs = 1;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error;
        if (Date.now() >= deadline) throw new ControlStalled();
        await Bun.sleep(pauseMs);
        pauseMs = Math.min(pauseMs * 2, 20);
      }
    }
  }
}

/** A child whose stdio are pipes the server reads and writes directly (the guardian never copies them). */
export class GuardedProcess extends GuardianLink {
  readonly stdin: FileSink;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array> | undefined;

  constructor(spec: SpawnSpec, options: { stderr: "pipe" | "ignore" }) {
    super(["pipe", "pipe", options.stderr], { spec });
    this.stdin = this.proc.stdin as FileSink;
    this.stdout = this.proc.stdout as ReadableStream<Uint8Array>;
    this.stderr = options.stderr === "pipe" ? (this.proc.stderr as ReadableStream<Uint8Array>) : undefined;
  }

  /**
   * The one way to end a guarded child: close its stdin (a worker or MCP peer leaves on EOF), after
   * half the grace SIGTERM the child, after the rest SIGKILL the whole group; resolves once the
   * guardian and its group are gone. graceMs 0 kills at once.
   */
  async stop(graceMs: number): Promise<void> {
    try {
      this.stdin.end();
    } catch {}
    if (graceMs > 0 && !(await settlesWithin(this.exited, graceMs / 2))) {
      // Only the child: SIGTERM to the group would reach the guardian, which answers it with SIGKILL.
      const pid = await withTimeout(
        this.childPid.catch(() => 0),
        0,
        () => 0,
      );
      if (pid > 1) {
        try {
          process.kill(pid, "SIGTERM");
        } catch {}
      }
      await settlesWithin(this.exited, graceMs / 2);
    }
    this.signal("SIGKILL");
    this.closeControl();
    await this.exited;
  }
}

/**
 * A kept session's worker under a keeping guardian (guardian/keeper.ts): the guardian holds the worker's
 * pipes and the server speaks to it over the guardian's socket. Its own stdio are /dev/null, so a
 * parked guardian writes to no pipe that nobody reads.
 */
export class KeptGuardian extends GuardianLink {
  constructor(spec: SpawnSpec, keep: KeepSpec) {
    super(["ignore", "ignore", "ignore"], { spec, keep }, KEEPER_ENV);
  }

  /** Asks the guardian to end the worker for good (it runs the grace itself). */
  end(graceMs: number): void {
    this.sendControl({ type: "end", grace_ms: Math.round(graceMs) });
  }

  /** Lets the guardian go: it parks the worker; its group is no longer this server's to kill. */
  release(): void {
    this.released = true;
    this.closeControl();
  }
}

class ControlStalled extends Error {
  constructor() {
    super(`the guardian took none of its command for ${GUARDIAN_CONTROL_WRITE_TIMEOUT_MS / 1000} s`);
  }
}

function describeControlFailure(error: unknown): string {
  return error instanceof ControlStalled
    ? `Process start failed: ${error.message}; it was stopped`
    : "Process start failed: the guardian's control channel broke";
}

/** Whether `promise` settles (either way) within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = promise.then(
    () => true,
    () => true,
  );
  return withTimeout(settled, ms, () => false);
}
