// The record of one kept worker: a private JSON file in the parking directory, named after the session's
// key and its guardian's pid. The guardian writes it (held when the worker starts, parked when its
// server goes, held again on adoption) and removes it when the worker ends for good; if the worker dies
// while parked, it is left as a tombstone saying why, for the next open of that session. Never a
// credential: the project, the name, the interpreter and the processes.
import { readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { writePrivateFileAtomic } from "../fs/atomic.ts";
import { readPrivateFile } from "../fs/private-file.ts";
import { PARKING_RECORD_MAX_BYTES } from "../limits.ts";

const Pid = v.pipe(v.number(), v.integer(), v.minValue(1));

export const ParkedRecord = v.object({
  version: v.literal(1),
  key: v.pipe(v.string(), v.regex(/^[0-9a-f]{16}$/)),
  project: v.string(),
  name: v.string(),
  /** The interpreter the worker runs (its path as selected). */
  interpreter: v.string(),
  python_version: v.nullable(v.string()),
  generation: v.pipe(v.number(), v.integer(), v.minValue(1)),
  keep_seconds: v.pipe(v.number(), v.integer(), v.minValue(1)),
  /** "held" by a live server, "parked" waiting for one, "ended" (a tombstone: see `ended_reason`). */
  state: v.picklist(["held", "parked", "ended"]),
  /** The server that holds it (null while parked). */
  holder_pid: v.nullable(Pid),
  /** Milliseconds since the epoch. */
  started_at: v.number(),
  parked_since: v.nullable(v.number()),
  expires_at: v.nullable(v.number()),
  ended_at: v.optional(v.number()),
  ended_reason: v.optional(v.string()),
  guardian_pid: Pid,
  worker_pid: v.nullable(Pid),
  boot_id: v.string(),
  socket: v.string(),
  /** What a contained session needs to stay contained (the sandbox's, opaque here); absent for others. */
  containment: v.optional(v.unknown()),
});
export type ParkedRecord = v.InferOutput<typeof ParkedRecord>;

const SUFFIX = ".json";

/** `<key>-<guardian pid>`: the record's (and its socket's) base name. */
export function recordBase(key: string, guardianPid: number): string {
  return `${key}-${guardianPid}`;
}

export function recordPath(dir: string, record: Pick<ParkedRecord, "key" | "guardian_pid">): string {
  return join(dir, `${recordBase(record.key, record.guardian_pid)}${SUFFIX}`);
}

export function writeRecord(dir: string, record: ParkedRecord): void {
  writePrivateFileAtomic(recordPath(dir, record), `${JSON.stringify(record)}\n`);
}

export function removeRecord(dir: string, record: Pick<ParkedRecord, "key" | "guardian_pid">): void {
  try {
    unlinkSync(recordPath(dir, record));
  } catch {
    // Already gone (another lister removed a stale one).
  }
}

/** One record file, or undefined when it is not one of ours (never trusted then, never removed). */
export function readRecord(path: string): ParkedRecord | undefined {
  try {
    const text = readPrivateFile(path, path, PARKING_RECORD_MAX_BYTES);
    if (text === null) return undefined;
    const parsed = v.safeParse(ParkedRecord, JSON.parse(text));
    return parsed.success ? parsed.output : undefined;
  } catch {
    return undefined;
  }
}

/** Every record in `dir` (of one key when given), in no particular order. */
export function listRecords(dir: string, key?: string): ParkedRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const records: ParkedRecord[] = [];
  for (const name of names) {
    if (!name.endsWith(SUFFIX) || (key !== undefined && !name.startsWith(`${key}-`))) continue;
    const record = readRecord(join(dir, name));
    if (record && `${recordBase(record.key, record.guardian_pid)}${SUFFIX}` === name) records.push(record);
  }
  return records;
}
