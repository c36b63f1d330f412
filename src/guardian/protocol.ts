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

/**
 * For a kept session's worker (docs/architecture.md, "Parking"): the guardian holds the worker's pipes,
 * relays its frames over a socket of its own, and parks the worker instead of ending it when its
 * server goes. What the record says of the session, and the secret an adopter must prove it knows.
 */
export const KeepSpec = v.strictObject({
  /** The parking directory (0700, existing). */
  dir: v.string(),
  key: v.pipe(v.string(), v.regex(/^[0-9a-f]{16}$/)),
  secret: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/)),
  keep_seconds: v.pipe(v.number(), v.integer(), v.minValue(1)),
  holder_pid: v.pipe(v.number(), v.integer(), v.minValue(1)),
  boot_id: v.string(),
  project: v.string(),
  name: v.string(),
  interpreter: v.string(),
  generation: v.pipe(v.number(), v.integer(), v.minValue(1)),
  /** Opaque to the guardian: what a contained session records to stay contained after adoption. */
  containment: v.optional(v.unknown()),
});
export type KeepSpec = v.InferOutput<typeof KeepSpec>;

export const ControlMessage = v.variant("type", [
  v.strictObject({ type: v.literal("spawn"), spec: SpawnSpec, keep: v.optional(KeepSpec) }),
  /** A keeping guardian: end the worker for good (stdin EOF, SIGTERM after half the grace, then SIGKILL). */
  v.strictObject({ type: v.literal("end"), grace_ms: v.pipe(v.number(), v.integer(), v.minValue(0)) }),
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
