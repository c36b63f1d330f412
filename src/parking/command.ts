// `repl-mcp sessions`: this user's kept sessions from their records (parked ones waiting for a server,
// held ones a running server has, and ended ones saying why), and `stop` to end parked ones now. The
// list goes to stdout (it is asked for); problems go to stderr.
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import type { SessionsCommandOptions } from "../cli/command.ts";
import { describe } from "../errors.ts";
import { WORKER_EXIT_WAIT_MS } from "../limits.ts";
import { NAME } from "../version.ts";
import { residentBytes } from "../worker/rss.ts";
import { formatDuration } from "./duration.ts";
import { KeeperLink } from "./link.ts";
import { forget, liveRecords } from "./lookup.ts";
import { parkingDirectory, parkingSecret } from "./place.ts";
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
  guardian_pid: number;
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
    ...live.map((record) => view(record)).sort(byProjectAndName),
    ...gone.map(({ record, reason }) => view(record, reason)).sort(byProjectAndName),
  ];
}

export async function sessionsCommand(options: SessionsCommandOptions): Promise<number> {
  if (options.stop) return await stop(options.stop, options.json);
  const sessions = keptSessions();
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ directory: parkingDirectory(), sessions }, null, 2)}\n`);
    return 0;
  }
  if (sessions.length === 0) {
    process.stdout.write("No kept sessions (python_session_open's keep, or --keep-sessions, keeps one).\n");
    return 0;
  }
  const rows = sessions.map((session) => [
    session.project,
    session.name,
    session.state,
    formatDuration(session.age_seconds),
    session.rss_bytes === null ? "-" : `${(session.rss_bytes / 1_048_576).toFixed(1)} MiB`,
    session.state === "parked"
      ? (session.expires_at ?? "-")
      : session.state === "held"
        ? `${session.keep} after its server exits`
        : (session.reason ?? "-"),
    session.holder_pid === null ? "-" : String(session.holder_pid),
  ]);
  process.stdout.write(table(["PROJECT", "NAME", "STATE", "AGE", "RSS", "EXPIRES", "HOLDER"], rows));
  return 0;
}

async function stop(what: NonNullable<SessionsCommandOptions["stop"]>, json: boolean): Promise<number> {
  const dir = parkingDirectory();
  const { live, gone } = liveRecords(dir, undefined, { remove: false });
  const project = what.project === undefined ? undefined : canonical(what.project);
  const matches = (record: ParkedRecord) =>
    what.all || (record.name === what.name && (project === undefined || record.project === project));
  const chosen = live.filter(matches);
  const ended = gone.filter(({ record }) => matches(record));
  if (!what.all) {
    const projects = new Set(chosen.map((record) => record.project));
    if (projects.size > 1) {
      process.stderr.write(
        `${NAME}: several projects keep a session named "${what.name}": ${[...projects].join(", ")}; name one with --project\n`,
      );
      return 1;
    }
    if (chosen.length === 0 && ended.length === 0) {
      process.stderr.write(
        `${NAME}: no kept session named "${what.name}"${project ? ` in ${project}` : ""}\n`,
      );
      return 1;
    }
  }
  for (const { record } of ended) forget(dir, record);
  const results: { project: string; name: string; stopped: boolean; held?: boolean; why?: string }[] = [];
  let secret: string | undefined;
  for (const record of chosen) {
    if (record.state !== "parked") {
      const why = `held by the repl-mcp server with pid ${record.holder_pid}; close it there`;
      results.push({ ...named(record), stopped: false, held: true, why });
      continue;
    }
    try {
      secret ??= parkingSecret(dir);
      const { link } = await KeeperLink.open(record.socket, secret, { end: WORKER_EXIT_WAIT_MS });
      await link.closed;
      results.push({ ...named(record), stopped: true });
    } catch (error) {
      results.push({ ...named(record), stopped: false, why: describe(error) });
    }
  }
  if (json)
    process.stdout.write(`${JSON.stringify({ stopped: results, removed_ended: ended.length }, null, 2)}\n`);
  else {
    for (const result of results) {
      const line = `${result.stopped ? "stopped" : "not stopped"}: ${result.name} (${result.project})${result.why ? `: ${result.why}` : ""}\n`;
      (result.stopped ? process.stdout : process.stderr).write(result.stopped ? line : `${NAME}: ${line}`);
    }
    if (results.length === 0 && what.all) process.stdout.write("No parked sessions to stop.\n");
  }
  // --all leaves held sessions to their servers; naming one that is held is a failure to stop it.
  return results.some((result) => !result.stopped && !(what.all && result.held)) ? 1 : 0;
}

function named(record: ParkedRecord) {
  return { project: record.project, name: record.name };
}

function canonical(path: string): string {
  try {
    return realpathSync(resolve(path));
  } catch {
    return resolve(path);
  }
}

function byProjectAndName(a: KeptSessionView, b: KeptSessionView): number {
  const key = (s: KeptSessionView) => `${s.project}\0${s.name}`;
  return key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join("  ");
  return `${[header, ...rows].map(line).join("\n")}\n`;
}
