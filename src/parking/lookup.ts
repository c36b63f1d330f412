// What a record says of its worker now: still there (held or parked), or gone and why. A record is gone
// when it is a tombstone (its worker died while parked), when the machine has restarted since it was
// written (another boot id), or when its guardian's process no longer exists; such records are removed
// by whoever finds them, without waiting for anything.
import { unlinkSync } from "node:fs";
import { bootId, processAlive } from "./place.ts";
import { listRecords, type ParkedRecord, removeRecord } from "./record.ts";

export type Standing = { live: true } | { live: false; reason: string };

export function standing(record: ParkedRecord, boot = bootId()): Standing {
  if (record.state === "ended") {
    return { live: false, reason: record.ended_reason ?? "its worker ended while parked" };
  }
  if (record.boot_id && boot && record.boot_id !== boot) {
    return { live: false, reason: "the machine has restarted since it was parked" };
  }
  if (!processAlive(record.guardian_pid)) {
    return { live: false, reason: "its guardian is gone (the worker ended while no server held it)" };
  }
  return { live: true };
}

/** Removes a record and its socket (a record of a worker that is gone). */
export function forget(dir: string, record: Pick<ParkedRecord, "key" | "guardian_pid" | "socket">): void {
  removeRecord(dir, record);
  try {
    unlinkSync(record.socket);
  } catch {}
}

/**
 * The records in `dir` (of one key when given), those whose workers are there and those that are gone
 * (with why). Gone ones are removed when `remove` (an open that reports them once); a listing leaves a
 * record until the time its worker would have expired, so the next open can still say what happened.
 */
export function liveRecords(
  dir: string,
  key: string | undefined,
  { remove }: { remove: boolean },
): { live: ParkedRecord[]; gone: { record: ParkedRecord; reason: string }[] } {
  const boot = bootId();
  const live: ParkedRecord[] = [];
  const gone: { record: ParkedRecord; reason: string }[] = [];
  for (const record of listRecords(dir, key)) {
    const now = standing(record, boot);
    if (now.live) {
      live.push(record);
      continue;
    }
    gone.push({ record, reason: now.reason });
    const expired = record.expires_at !== null && record.expires_at < Date.now();
    if (remove || expired) forget(dir, record);
  }
  return { live, gone };
}
