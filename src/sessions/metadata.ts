// What a session looks like from outside: the `server` block of python_health and each entry of the
// session list. Never starts Python.
import * as v from "valibot";
import type { KernelSeat } from "../kernels/seat.ts";
import {
  CODE_MAX_BYTES,
  FRAME_MAX_BYTES,
  HISTORY_RUNS,
  RPC_CONCURRENCY,
  RSS_SAMPLE_INTERVAL_MS,
  TIMEOUT_MAX_SECONDS,
} from "../limits.ts";
import { VERSION } from "../version.ts";
import { keepView } from "./keeping.ts";
import type { Session } from "./session.ts";

export const RUNTIME = "bun-supervisor/cpython-worker";

const VersionInfo = v.object({
  version: v.string(),
  executable: v.string(),
  major: v.number(),
  minor: v.number(),
});

/** Where a kernel session runs (never the server's token or a credential). */
const KernelPlace = v.object({
  kernel_server: v.string(),
  url: v.string(),
  kernelspec: v.string(),
  kernel_id: v.string(),
  /** Started by this session (shut down when it closes), or attached to (left running). */
  owned: v.boolean(),
});

const Environment = v.object({
  source: v.picklist(["explicit", "project_venv", "server_default", "kernel_server"]),
  python: v.string(),
  version: v.nullable(v.string()),
  actual_python_executable: v.nullable(v.string()),
  version_info: v.nullable(VersionInfo),
  validated: v.boolean(),
  runtime_status: v.picklist(["lazy", "running", "stopped", "closed"]),
  error: v.optional(v.string()),
  kernel: v.optional(KernelPlace),
});

/**
 * Whether the session's workers run inside the OS sandbox (--sandbox; docs/sandbox.md), with a short
 * summary of its policy, or why not.
 */
export const SandboxState = v.union([
  v.object({
    contained: v.literal(true),
    /** The policy file, or "built-in". */
    policy: v.string(),
    writable: v.array(v.string()),
    read_denies: v.number(),
    allowed_hosts: v.array(v.string()),
    denied_hosts: v.number(),
    /** Whether a host neither allowed nor denied is put to the person (else refused). */
    asks_unknown_hosts: v.boolean(),
  }),
  v.object({ contained: v.literal(false), reason: v.string() }),
]);
/** A kept session's keep (docs/sessions.md, "Keeping a session"). */
const KeepView = v.object({
  /** As asked: "8h". */
  duration: v.string(),
  seconds: v.number(),
  /** If this server ended now, the worker would be kept (parked) until this time. */
  until: v.string(),
});

/** One session as python_health, python_session_list/open/inspect publish it. */
export const SessionMetadata = v.object({
  server_id: v.string(),
  session_id: v.string(),
  name: v.string(),
  project: v.string(),
  closed: v.boolean(),
  generation: v.pipe(v.number(), v.integer(), v.minValue(0)),
  version: v.string(),
  runtime: v.string(),
  execution_mode: v.string(),
  python_executable: v.string(),
  python: v.nullable(
    v.object({
      python_version: v.string(),
      python_executable: v.string(),
      pid: v.number(),
      type: v.string(),
      running: v.boolean(),
    }),
  ),
  active_run: v.nullable(v.string()),
  environment: Environment,
  limits: v.object({
    code_bytes: v.number(),
    frame_bytes: v.number(),
    timeout_seconds: v.number(),
    history_runs: v.number(),
    rpc_concurrency: v.number(),
    worker_rss_mib: v.number(),
  }),
  memory_limit: v.string(),
  sandbox: SandboxState,
  /** Whether its worker outlives this server (parked for the next server to adopt). */
  kept: v.boolean(),
  keep: v.optional(KeepView),
  /** Set when this session took over a worker an earlier server parked. */
  adopted: v.optional(v.boolean()),
  /** When that worker had been parked (null: it was never let go, its server died first). */
  parked_since: v.optional(v.nullable(v.string())),
});
export type SessionMetadata = v.InferOutput<typeof SessionMetadata>;
export const EXECUTION_MODE = "trusted-local; full filesystem access; not a security sandbox";
export const CONTAINED_MODE = "contained-local; OS sandbox with the policy in sandbox";

function environment(session: Session): v.InferOutput<typeof Environment> {
  const ready = session.supervisor.python ?? session.kernel?.ready;
  // Opened sessions were probed before publication; the default session learns its version when it runs.
  const info = session.probe
    ? {
        version: session.probe.version,
        executable: session.probe.executable,
        major: session.probe.major,
        minor: session.probe.minor,
      }
    : ready
      ? {
          version: ready.python_version,
          executable: ready.python_executable,
          major: Number(ready.python_version.split(".")[0]),
          minor: Number(ready.python_version.split(".")[1]),
        }
      : null;
  return {
    source: session.source,
    python: session.python,
    version: info?.version ?? null,
    actual_python_executable: info?.executable ?? null,
    version_info: info,
    validated: info !== null,
    runtime_status: session.runtimeStatus,
    ...(session.problem ? { error: session.problem } : {}),
    ...(session.kernel ? { kernel: kernelPlace(session.kernel) } : {}),
  };
}

function kernelPlace(seat: KernelSeat): v.InferOutput<typeof KernelPlace> {
  return {
    kernel_server: seat.server.name,
    url: seat.server.url,
    kernelspec: seat.kernelName,
    kernel_id: seat.kernelId,
    owned: seat.owned,
  };
}

export function sessionMetadata(session: Session, maxMemoryMib: number): SessionMetadata {
  const supervisor = session.supervisor;
  const ready = supervisor.python;
  return {
    server_id: session.serverId,
    session_id: session.id,
    name: session.name,
    project: session.project,
    closed: session.closed,
    generation: supervisor.generation,
    version: VERSION,
    runtime: RUNTIME,
    execution_mode: session.sandbox ? CONTAINED_MODE : EXECUTION_MODE,
    python_executable: session.python,
    python: ready
      ? {
          python_version: ready.python_version,
          python_executable: ready.python_executable,
          pid: ready.pid,
          type: ready.implementation,
          running: supervisor.running,
        }
      : null,
    active_run: supervisor.active?.id ?? null,
    environment: environment(session),
    limits: {
      code_bytes: CODE_MAX_BYTES,
      frame_bytes: FRAME_MAX_BYTES,
      timeout_seconds: TIMEOUT_MAX_SECONDS,
      history_runs: HISTORY_RUNS,
      rpc_concurrency: RPC_CONCURRENCY,
      worker_rss_mib: maxMemoryMib,
    },
    memory_limit: session.kernel
      ? "Not applied: the kernel runs on its Jupyter server's host, whose own limits govern its memory."
      : maxMemoryMib > 0
        ? `Worker RSS sampled every ${RSS_SAMPLE_INTERVAL_MS} ms while a cell runs; over ${maxMemoryMib} MiB the ` +
          "worker is killed and variables cleared. Child processes are not counted. 0 disables."
        : "Disabled (--max-memory-mib 0).",
    sandbox: session.sandbox ?? {
      contained: false,
      reason: session.kernel
        ? "runs on a Jupyter kernel, on its server's host: not contained"
        : "the server was started without --sandbox: trusted local execution",
    },
    kept: session.kept,
    ...(session.kept && session.keep ? { keep: keepView(session.keep.seconds) } : {}),
    ...adoption(session),
  };
}

function adoption(session: Session): { adopted?: boolean; parked_since?: string | null } {
  const adopted = session.arrival?.adopted;
  if (!adopted) return {};
  const since = adopted.parkedSince;
  return { adopted: true, parked_since: since === null ? null : new Date(since).toISOString() };
}
