// Messages between the server and a guardian. The server writes the command spec (then job
// registrations) on the guardian's control fd; the guardian answers on its event fd. Neither ever
// appears in argv, so credentials in a peer's environment stay private.
import * as v from "valibot";

export const CONTROL_FD = 3;
export const EVENT_FD = 4;

export const SpawnSpec = v.strictObject({
  program: v.string(),
  args: v.array(v.string()),
  env: v.record(v.string(), v.string()),
  cwd: v.string(),
  /**
   * Paths the guardian removes (recursively) once its child is gone for good: what a contained worker
   * had of its own outside its sandbox (its private temporary directory, its proxy socket), so that a
   * server killed with SIGKILL leaves none of it behind.
   */
  cleanup: v.optional(v.array(v.string())),
});
export type SpawnSpec = v.InferOutput<typeof SpawnSpec>;

export const ControlMessage = v.variant("type", [
  v.strictObject({ type: v.literal("spawn"), spec: SpawnSpec }),
  /** A detached process group the child created; killed with everything else. */
  v.strictObject({ type: v.literal("job"), pgid: v.pipe(v.number(), v.integer(), v.minValue(2)) }),
  v.strictObject({ type: v.literal("job_done"), pgid: v.pipe(v.number(), v.integer(), v.minValue(2)) }),
]);
export type ControlMessage = v.InferOutput<typeof ControlMessage>;

export const GuardianEvent = v.variant("type", [
  v.object({ type: v.literal("spawned"), pid: v.number() }),
  v.object({ type: v.literal("exit"), code: v.nullable(v.number()), signal: v.nullable(v.string()) }),
  v.object({ type: v.literal("error"), message: v.string() }),
]);
export type GuardianEvent = v.InferOutput<typeof GuardianEvent>;
