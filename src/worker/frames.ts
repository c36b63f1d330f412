// Frames a worker sends (see docs/worker-protocol.md). Parsed with valibot at the boundary so the
// rest of the supervisor works with typed values.
import * as v from "valibot";
import { ArtifactReference } from "../artifacts/reference.ts";
import { VALUE_INFO_COLUMNS_MAX } from "../limits.ts";

export const ReadyFrame = v.object({
  type: v.literal("ready"),
  python_version: v.string(),
  python_executable: v.string(),
  pid: v.pipe(v.number(), v.integer(), v.minValue(1)),
  implementation: v.optional(v.string(), "cpython"),
});
export type ReadyFrame = v.InferOutput<typeof ReadyFrame>;

export const OutputFrame = v.object({
  type: v.literal("output"),
  id: v.string(),
  stream: v.picklist(["stdout", "stderr"]),
  text: v.string(),
});
export type OutputFrame = v.InferOutput<typeof OutputFrame>;

/** Which parts of a result were cut to their limits. */
export const Truncated = v.object({
  stdout: v.boolean(),
  stderr: v.boolean(),
  return: v.boolean(),
  error: v.optional(v.boolean()),
});

/**
 * What a library preview saw of a numpy, pandas or polars value: its class, shape and dtype, or for a
 * frame the dtype of each of its first columns (docs/worker-protocol.md, "Safe previews").
 */
export const ValueInfo = v.object({
  /** The library's own class, module-qualified: `pandas.DataFrame`, `numpy.ndarray`, `numpy.float64`. */
  type: v.string(),
  /** `[]` for a scalar. */
  shape: v.array(v.pipe(v.number(), v.integer(), v.minValue(0))),
  /** Arrays, series, indexes and scalars. */
  dtype: v.optional(v.string()),
  /** Frames: column name → dtype, for the columns `columns` lists. */
  dtypes: v.optional(v.record(v.string(), v.string())),
  /** Frames: the first column names, as strings. */
  columns: v.optional(v.pipe(v.array(v.string()), v.maxLength(VALUE_INFO_COLUMNS_MAX))),
  /** Frames: true when the frame has more columns than `columns` lists. */
  columns_truncated: v.optional(v.boolean()),
});
export type ValueInfo = v.InferOutput<typeof ValueInfo>;

/** Something a contained run was refused (docs/sandbox.md "Reading a denial"). */
export const SandboxDenial = v.object({
  kind: v.picklist(["read", "write", "network"]),
  /** The path, or host:port. */
  target: v.string(),
  reason: v.string(),
});
export type SandboxDenial = v.InferOutput<typeof SandboxDenial>;
/** One run a worker retained, as a history request returns it (an adopted session's earlier cells). */
export const EarlierRun = v.object({
  run_id: v.string(),
  source: v.string(),
  stdout: v.optional(v.string()),
  stderr: v.optional(v.string()),
  return_value: v.optional(v.string()),
  error: v.optional(v.string()),
});
export type EarlierRun = v.InferOutput<typeof EarlierRun>;

export const WorkerResult = v.object({
  success: v.boolean(),
  stdout: v.string(),
  stderr: v.string(),
  return_value: v.nullable(v.string()),
  value: v.optional(v.unknown()),
  /** Set for numpy, pandas and polars values, whose return_value is a preview of our own. */
  value_info: v.optional(ValueInfo),
  /** The whole trailing value, kept as an artifact because its preview was shortened. */
  artifact: v.optional(ArtifactReference),
  artifact_error: v.optional(v.string()),
  error: v.nullable(v.string()),
  truncated: Truncated,
  state: v.picklist(["preserved", "cleared"]),
  interrupted: v.optional(v.boolean()),
  background_tasks_cancelled: v.optional(v.number()),
  /** The cell left work that cannot be stopped; the worker exits after this result. */
  fatal: v.optional(v.boolean()),
  exit_code: v.optional(v.number()),
  namespace: v.optional(v.record(v.string(), v.unknown())),
  /** A history request's answer: the worker's retained runs, oldest first (docs/worker-protocol.md). */
  history: v.optional(v.array(EarlierRun)),
  /** false: the server had already read all of fd 2 when the result was sent, so no barrier follows. */
  stderr_barrier: v.optional(v.boolean()),
  /**
   * Set only when the worker itself failed (a bug), not the cell; KERNEL_CONNECTION_LOST only by a kernel
   * session's channel, for a run it answers itself (kernels/kernel-worker.ts), never by worker.py.
   */
  error_code: v.optional(v.picklist(["INTERNAL", "FILE_NOT_FOUND", "KERNEL_CONNECTION_LOST"])),
  /** Contained sessions only: what the run was refused (at most SANDBOX_DENIALS_MAX). */
  sandbox_denials: v.optional(v.array(SandboxDenial)),
});
export type WorkerResult = v.InferOutput<typeof WorkerResult>;

export const ResultFrame = v.object({ type: v.literal("result"), id: v.string(), result: WorkerResult });
export type ResultFrame = v.InferOutput<typeof ResultFrame>;

/** A child that leads its own process group started or ended; its group must die with the worker. */
export const JobFrame = v.object({
  type: v.literal("job"),
  id: v.nullable(v.string()),
  pid: v.pipe(v.number(), v.integer()),
  action: v.picklist(["started", "finished"]),
});
export type JobFrame = v.InferOutput<typeof JobFrame>;

/** Part of a display: text whole, an image as a base64 chunk (`more` until its last chunk). */
export const DisplayFrame = v.object({
  type: v.literal("display"),
  id: v.string(),
  mime: v.pipe(v.string(), v.maxLength(100)),
  text: v.optional(v.string()),
  data: v.optional(v.string()),
  bytes: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
  more: v.optional(v.boolean()),
});
export type DisplayFrame = v.InferOutput<typeof DisplayFrame>;

/** A bridge request from a cell (docs/worker-protocol.md, "Bridge calls"). */
export const RpcFrame = v.object({
  type: v.literal("rpc"),
  id: v.string(),
  run_id: v.string(),
  op: v.string(),
  params: v.optional(v.record(v.string(), v.unknown()), {}),
});
export type RpcFrame = v.InferOutput<typeof RpcFrame>;

export const RpcCancelFrame = v.object({
  type: v.literal("rpc_cancel"),
  id: v.string(),
  run_id: v.optional(v.string()),
});

/** Each frame type the server handles, by its `type`. */
const FRAMES = {
  ready: ReadyFrame,
  output: OutputFrame,
  result: ResultFrame,
  job: JobFrame,
  rpc: RpcFrame,
  rpc_cancel: RpcCancelFrame,
  display: DisplayFrame,
} as const;

export const WorkerFrame = v.variant("type", Object.values(FRAMES));
export type WorkerFrame = v.InferOutput<typeof WorkerFrame>;

/**
 * Frames of types this server does not handle yet are ignored, as the protocol allows; a known type
 * that does not match its schema means the worker is broken. (Looked up by type rather than through
 * the variant: this runs for every frame.)
 */
export function parseWorkerFrame(value: unknown): WorkerFrame | undefined {
  const type = (value as { type?: unknown } | null)?.type;
  if (typeof type !== "string" || !Object.hasOwn(FRAMES, type)) return undefined;
  const parsed = v.safeParse(FRAMES[type as keyof typeof FRAMES], value);
  if (parsed.success) return parsed.output as WorkerFrame;
  throw new Error(`malformed ${type} frame from worker`);
}

/** Written by the worker to its fd 2 after a cell, so the server knows it has read all native stderr. */
export const BARRIER_PREFIX = "\x1erepl-mcp-barrier:";
