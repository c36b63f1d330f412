// The guardian: the same binary in a hidden mode. It is started in a session of its own, so its pid
// is the process group id; the child it spawns stays in that group. When its control fd reaches
// EOF (the server exited, even by SIGKILL, or closed it on purpose) or the child exits, it kills the
// child, every registered job group, and finally its own group. It never touches the child's stdio:
// the child inherits the pipes the server created, so frames flow without an extra hop.
import { writeSync } from "node:fs";
import * as v from "valibot";
import { GUARDIAN_SPEC_MAX_BYTES } from "../limits.ts";
import { decodeLine, LineSplitter } from "../wire/lines.ts";
import { signalGroup } from "./kill.ts";
import { CONTROL_FD, ControlMessage, EVENT_FD, type GuardianEvent } from "./protocol.ts";

function emit(event: GuardianEvent): void {
  try {
    writeSync(EVENT_FD, `${JSON.stringify(event)}\n`);
  } catch {
    // The server is gone; the lifeline will end us.
  }
}

export async function runGuardian(): Promise<never> {
  // SIGINT addressed to the group is meant for the child (KeyboardInterrupt); the guardian stays.
  process.on("SIGINT", () => {});
  const jobs = new Set<number>();
  let child: ReturnType<typeof Bun.spawn> | undefined;

  const finish = (code: number): never => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    for (const pgid of jobs) signalGroup(pgid, "SIGKILL");
    // Whatever else is left in our group (the child's own children) goes too, and so do we.
    signalGroup(process.pid, "SIGKILL");
    process.exit(code);
  };
  process.on("SIGTERM", () => finish(143));
  process.on("SIGHUP", () => finish(129));

  const splitter = new LineSplitter(GUARDIAN_SPEC_MAX_BYTES);
  try {
    for await (const chunk of Bun.file(CONTROL_FD).stream()) {
      for (const line of splitter.push(chunk)) {
        const message = v.parse(ControlMessage, JSON.parse(decodeLine(line)));
        if (message.type === "job") jobs.add(message.pgid);
        else if (message.type === "job_done") jobs.delete(message.pgid);
        else if (child) throw new Error("a guardian runs one child");
        else {
          const { spec } = message;
          try {
            child = Bun.spawn([spec.program, ...spec.args], {
              cwd: spec.cwd,
              env: spec.env,
              stdio: ["inherit", "inherit", "inherit"],
            });
          } catch (error) {
            emit({ type: "error", message: (error as Error).message });
            finish(1);
          }
          const started = child;
          if (!started) finish(1);
          emit({ type: "spawned", pid: started?.pid ?? 0 });
          void started?.exited.then(() => {
            emit({
              type: "exit",
              code: started.exitCode,
              signal: started.signalCode === null ? null : String(started.signalCode),
            });
            finish(0);
          });
        }
      }
    }
  } catch (error) {
    emit({ type: "error", message: `guardian control channel failed: ${(error as Error).message}` });
  }
  // Control EOF: the server is gone or let us go.
  return finish(0);
}
