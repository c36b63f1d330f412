// This user's kept sessions as people see them (`repl-mcp sessions`, doctor): from the records, with the
// workers' memory read from /proc.
import { residentBytes } from "../worker/rss.ts";
import { formatDuration } from "./duration.ts";
import { type KernelRecord, listKernelRecords } from "./kernel-record.ts";
import { liveRecords } from "./lookup.ts";
import { parkingDirectory, processAlive } from "./place.ts";
import type { ParkedRecord } from "./record.ts";

/** One kept session as the command shows it. */
export interface KeptSessionView {
  project: string;
  name: string;
  state: "parked" | "held" | "ended";
  /** Since its worker started, in seconds. */
  age_seconds: number;
  /** The worker's resident memory, bytes (null when it cannot be read). */
  rss_bytes: number | null;
  /** Parked: when it will be ended (ISO). Held: null (it is kept for `keep` after its server lets go). */
  expires_at: string | null;
  keep: string;
  holder_pid: number | null;
  generation: number;
  worker_pid: number | null;
  guardian_pid: number | null;
  /** A kernel session's kernel: `kernel <id> on "<server>"` (its memory is its Jupyter server's host's). */
  kernel?: string;
  /** Ended: why. */
  reason?: string;
}

/** Every kept session of this user, live ones first (records of gone workers are left for their next open). */
export function keptSessions(): KeptSessionView[] {
  const { live, gone } = liveRecords(parkingDirectory(), undefined, { remove: false });
  const now = Date.now();
  const view = (record: ParkedRecord, reason?: string): KeptSessionView => ({
    project: record.project,
    name: record.name,
    state: reason === undefined ? (record.state === "parked" ? "parked" : "held") : "ended",
    age_seconds: Math.max(0, Math.round((now - record.started_at) / 1000)),
    rss_bytes: reason === undefined && record.worker_pid ? (residentBytes(record.worker_pid) ?? null) : null,
    expires_at:
      record.state === "parked" && record.expires_at !== null
        ? new Date(record.expires_at).toISOString()
        : null,
    keep: formatDuration(record.keep_seconds),
    holder_pid: record.state === "held" ? record.holder_pid : null,
    generation: record.generation,
    worker_pid: record.worker_pid,
    guardian_pid: record.guardian_pid,
    ...(reason === undefined ? {} : { reason }),
  });
  return [
    ...[...live.map((record) => view(record)), ...listKernelRecords(parkingDirectory()).map(kernelView)].sort(
      byProjectAndName,
    ),
    ...gone.map(({ record, reason }) => view(record, reason)).sort(byProjectAndName),
  ];
}

function kernelView(record: KernelRecord): KeptSessionView {
  const holderGone =
    record.state === "held" && record.holder_pid !== null && !processAlive(record.holder_pid);
  return {
    project: record.project || `(kernel server "${record.server}")`,
    name: record.name,
    state: record.state === "parked" || holderGone ? "parked" : "held",
    age_seconds: Math.max(0, Math.round((Date.now() - record.started_at) / 1000)),
    rss_bytes: null,
    expires_at: record.expires_at === null ? null : new Date(record.expires_at).toISOString(),
    keep: formatDuration(record.keep_seconds),
    holder_pid: record.state === "held" && !holderGone ? record.holder_pid : null,
    generation: record.generation,
    worker_pid: null,
    guardian_pid: null,
    kernel: `kernel ${record.kernel_id} on "${record.server}"`,
  };
}

function byProjectAndName(a: KeptSessionView, b: KeptSessionView): number {
  const key = (s: KeptSessionView) => `${s.project}\0${s.name}`;
  return key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;
}
