// Entry point, and the only module with top-level side effects. The guardian mode is decided first
// and loads nothing else, so a guardian starts as fast and as small as possible.
import { GUARDIAN_FLAG } from "./guardian/flag.ts";
import { startingUp } from "./jit.ts";

if (process.argv[2] === GUARDIAN_FLAG) {
  const { runGuardian } = await import("./guardian/main.ts");
  await runGuardian();
} else {
  startingUp();
  const [{ runCli }, { serve }] = await Promise.all([import("./cli/command.ts"), import("./serve.ts")]);
  await runCli({
    serve,
    doctor: async (options) => (await import("./doctor/doctor.ts")).doctor(options),
    viewer: async (options) => (await import("./viewer/command.ts")).viewerCommand(options),
    sessions: async (options) => (await import("./parking/command.ts")).sessionsCommand(options),
  });
}
