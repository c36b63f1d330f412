// `repl-mcp sessions`: this user's kept sessions from their records (parked ones waiting for a server,
// held ones a running server has, and ended ones saying why), and `stop` to end parked ones now. The
// list goes to stdout (it is asked for); problems go to stderr.
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import type { SessionsCommandOptions } from "../cli/command.ts";
import { describe } from "../errors.ts";
import { WORKER_EXIT_WAIT_MS } from "../limits.ts";
import { NAME } from "../version.ts";
import { formatDuration } from "./duration.ts";
import { type KernelRecord, listKernelRecords, writeKernelRecord } from "./kernel-record.ts";
import { KeeperLink } from "./link.ts";
import { keptSessions } from "./listing.ts";
import { forget, liveRecords } from "./lookup.ts";
import { parkingDirectory, parkingSecret, processAlive } from "./place.ts";
import type { ParkedRecord } from "./record.ts";

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
  const kernels = listKernelRecords(dir).filter(
    (record) =>
      what.all || (record.name === what.name && (project === undefined || record.project === project)),
  );
  if (!what.all) {
    const projects = new Set([...chosen, ...kernels].map((record) => record.project));
    if (projects.size > 1) {
      process.stderr.write(
        `${NAME}: several projects keep a session named "${what.name}": ${[...projects].join(", ")}; name one with --project\n`,
      );
      return 1;
    }
    if (chosen.length === 0 && ended.length === 0 && kernels.length === 0) {
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
  for (const record of kernels) results.push(expireKernel(dir, record));
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

/**
 * A kept kernel cannot be shut down from here (that takes its server's token, which only a server
 * configured with --kernels has): its keep is made to run out now, and the next such server shuts it down.
 */
function expireKernel(dir: string, record: KernelRecord) {
  const held = record.state === "held" && record.holder_pid !== null && processAlive(record.holder_pid);
  if (held) {
    const why = `held by the repl-mcp server with pid ${record.holder_pid}; close it there`;
    return { ...named(record), stopped: false, held: true, why };
  }
  const now = Date.now();
  writeKernelRecord(dir, {
    ...record,
    state: "parked",
    holder_pid: null,
    parked_since: record.parked_since ?? now,
    expires_at: now,
  });
  return {
    ...named(record),
    stopped: true,
    why: `its kernel on "${record.server}" is shut down by the next repl-mcp started with --kernels naming that server`,
  };
}

function named(record: { project: string; name: string }) {
  return { project: record.project, name: record.name };
}

function canonical(path: string): string {
  try {
    return realpathSync(resolve(path));
  } catch {
    return resolve(path);
  }
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
