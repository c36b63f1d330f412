// What a session looks like from outside: the `server` block of python_health and each entry of the
// session list. Never starts Python.
import {
  CODE_MAX_BYTES,
  FRAME_MAX_BYTES,
  HISTORY_RUNS,
  RPC_CONCURRENCY,
  RSS_SAMPLE_INTERVAL_MS,
  TIMEOUT_MAX_SECONDS,
} from "../limits.ts";
import { VERSION } from "../version.ts";
import type { Session } from "./session.ts";

export const RUNTIME = "bun-supervisor/cpython-worker";
export const EXECUTION_MODE = "trusted-local; full filesystem access; not a security sandbox";

function environment(session: Session) {
  const ready = session.supervisor.python;
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
  };
}

export function sessionMetadata(session: Session, maxMemoryMib: number) {
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
    execution_mode: EXECUTION_MODE,
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
    memory_limit:
      maxMemoryMib > 0
        ? `Worker RSS sampled every ${RSS_SAMPLE_INTERVAL_MS} ms while a cell runs; over ${maxMemoryMib} MiB the ` +
          "worker is killed and variables cleared. Child processes are not counted. 0 disables."
        : "Disabled (--max-memory-mib 0).",
  };
}
