// The guardian: the same binary in a hidden mode. It is started in a session of its own, so its pid
// is the process group id; the child it spawns stays in that group. When its control fd reaches
// EOF (the server exited, even by SIGKILL, or closed it on purpose) or the child exits, it kills the
// child, every registered job group, and finally its own group. It never touches the child's stdio:
// the child inherits the pipes the server created, so frames flow without an extra hop.
//
// One guardian runs beside every worker and stdio peer, so it stays small: it writes its events
// through a FileSink rather than node:fs, loads node:fs only to let go of the child's pipes, and the
// server starts it without a JIT (see guardian/spawn.ts).
//
// A kept session's worker is the exception (keeper.ts, loaded only then): its guardian holds the
// worker's pipes, relays its frames, and when the server goes it parks the worker instead of ending it.
import * as v from "valibot";
import { GUARDIAN_CHILD_EXIT_WAIT_MS, GUARDIAN_EVENT_FLUSH_MS, GUARDIAN_SPEC_MAX_BYTES } from "../limits.ts";
import { waitAtMost } from "../timeout.ts";
import { decodeLine, LineSplitter } from "../wire/lines.ts";
import type { Keeper } from "./keeper.ts";
import { signalGroup } from "./kill.ts";
import { CONTROL_FD, ControlMessage, EVENT_FD, type GuardianEvent, type SpawnSpec } from "./protocol.ts";

const events = Bun.file(EVENT_FD).writer();

/** Queues one event line; written at once when the socket has room, flushed before the guardian exits. */
function emit(event: GuardianEvent): void {
  try {
    events.write(`${JSON.stringify(event)}\n`);
    void Promise.resolve(events.flush()).catch(() => {});
  } catch {
    // The server is gone; the lifeline will end us.
  }
}

export async function runGuardian(): Promise<never> {
  // SIGINT addressed to the group is meant for the child (KeyboardInterrupt); the guardian stays.
  process.on("SIGINT", () => {});
  const jobs = new Set<number>();
  let child: ReturnType<typeof Bun.spawn> | undefined;
  let keeper: Keeper | undefined;
  let cleanup: string[] = [];
  let finishing: Promise<never> | undefined;

  const finish = (code: number): Promise<never> => {
    finishing ??= end(code);
    return finishing;
  };
  const end = async (code: number): Promise<never> => {
    const running = child ?? keeper?.child;
    if (running && running.exitCode === null && running.signalCode === null) running.kill("SIGKILL");
    for (const pgid of jobs) signalGroup(pgid, "SIGKILL");
    // The server takes our exit for the child's: it must be gone (reaped), not merely sent SIGKILL.
    if (running) await waitAtMost(running.exited, GUARDIAN_CHILD_EXIT_WAIT_MS);
    // Only now is the child gone for good: a parked worker keeps what it had outside itself.
    removeAll(cleanup);
    keeper?.gone();
    // The child and the jobs are already gone: a server that reads nothing cannot hold the rest up.
    await waitAtMost(Promise.resolve(events.flush()), GUARDIAN_EVENT_FLUSH_MS);
    // Whatever else is left in our group (the child's own children) goes too, and so do we.
    signalGroup(process.pid, "SIGKILL");
    process.exit(code);
  };
  process.on("SIGTERM", () => void finish(143));
  process.on("SIGHUP", () => void finish(129));

  const splitter = new LineSplitter(GUARDIAN_SPEC_MAX_BYTES);
  try {
    for await (const chunk of Bun.file(CONTROL_FD).stream()) {
      for (const line of splitter.push(chunk)) {
        const message = v.parse(ControlMessage, JSON.parse(decodeLine(line)));
        if (message.type === "job") jobs.add(message.pgid);
        else if (message.type === "job_done") jobs.delete(message.pgid);
        else if (message.type === "end") void keeper?.end(message.grace_ms);
        else if (child || keeper) throw new Error("a guardian runs one child");
        else if (message.keep) {
          cleanup = message.spec.cleanup ?? [];
          const { Keeper } = await import("./keeper.ts");
          keeper = Keeper.start(message.spec, message.keep, { jobs, emit, finish });
          if (!keeper) return finish(1);
        } else {
          cleanup = message.spec.cleanup ?? [];
          child = start(message.spec, () => void finish(0));
          if (!child) return finish(1);
        }
      }
    }
  } catch (error) {
    emit({ type: "error", message: `guardian control channel failed: ${(error as Error).message}` });
  }
  // Control EOF: the server is gone or let us go. A kept worker is parked, not ended.
  if (keeper) {
    keeper.lifelineLost();
    return await new Promise<never>(() => {});
  }
  return finish(0);
}

/**
 * Starts the child with exactly the environment of its spec (never the guardian's own), reports its
 * pid and later its exit, then calls `exited`. Returns undefined, having reported why, if it could not.
 */
function start(spec: SpawnSpec, exited: () => void): ReturnType<typeof Bun.spawn> | undefined {
  let child: ReturnType<typeof Bun.spawn>;
  try {
    child = Bun.spawn([spec.program, ...spec.args], {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ["inherit", "inherit", "inherit"],
    });
  } catch (error) {
    emit({ type: "error", message: (error as Error).message });
    return undefined;
  }
  emit({ type: "spawned", pid: child.pid });
  releaseChildPipes();
  void child.exited.then(() => {
    emit({
      type: "exit",
      code: child.exitCode,
      signal: child.signalCode === null ? null : String(child.signalCode),
    });
    exited();
  });
  return child;
}

/** Removes what the child had outside itself; whatever cannot be removed is left (nobody is left to tell). */
function removeAll(paths: string[]): void {
  if (paths.length === 0) return;
  const { rmSync } = require("node:fs") as typeof import("node:fs");
  for (const path of paths) {
    try {
      rmSync(path, { recursive: true, force: true });
    } catch {
      // Busy or already gone.
    }
  }
}

/**
 * Once the child holds its own copies, the guardian's stdin and stdout (the child's input and output
 * pipes) become /dev/null. A copy kept here would keep the pipe open after the child closed its end:
 * the server would see a worker that closed its frame pipe only when the worker exited, and a write to
 * a child that closed its input would fill the pipe instead of failing. node:fs is loaded here, after
 * the spawn, because Bun has no lighter way to close a descriptor (a socket adopted with Bun.connect
 * would be closed too, but turns the shared pipe non-blocking under the child).
 */
function releaseChildPipes(): void {
  const { closeSync, openSync } = require("node:fs") as typeof import("node:fs");
  for (const [fd, flags] of [
    [0, "r"],
    [1, "w"],
  ] as const) {
    try {
      closeSync(fd);
      // The lowest free descriptor is the one just closed, so /dev/null takes its place.
      const spare = openSync("/dev/null", flags);
      if (spare !== fd) closeSync(spare);
    } catch {
      // Already closed: nothing of the child's is held here.
    }
  }
}
