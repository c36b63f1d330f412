// The --journal file as the next server would find it: absent, in use by a running server, unusable
// (and why), or its records, with the calls whose outcome nobody knows.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { readJournalFile } from "../broker/journal-file.ts";
import { describe } from "../errors.ts";
import { lockPathFor, tryLockExclusive } from "../fs/lock.ts";
import { type Finding, note, ok, problem, type Section } from "./report.ts";

/**
 * Whether a running server holds the lock. A lock file that does not exist cannot be held; one that
 * does is tried and released at once (a server starting in that instant would see it taken).
 */
function heldByServer(lockPath: string): boolean {
  if (!existsSync(lockPath)) return false;
  const lock = tryLockExclusive(lockPath, "Broker journal");
  lock?.release();
  return lock === null;
}

export function journalSection(journal: string | undefined, project: string): Section {
  if (journal === undefined) {
    return {
      title: "Journal",
      data: { durable: false },
      findings: [note("In memory only; pass --journal PATH to keep it across crashes")],
    };
  }
  const path = resolve(project, journal);
  const findings: Finding[] = [];
  const data: Record<string, unknown> = { durable: true, path, lock: lockPathFor(path) };
  try {
    data.in_use = heldByServer(lockPathFor(path));
    data.exists = existsSync(path);
    const records = readJournalFile(path);
    const count = (status: string) => records.filter((record) => record.status === status).length;
    data.records = records.length;
    data.outcome_unknown = count("outcome_unknown");
    data.dispatched = count("dispatched");
    findings.push(
      ok(
        `${path}: ${data.exists ? `${records.length} records` : "not created yet"}` +
          (data.in_use ? ", in use by a running server" : ""),
      ),
    );
    if (data.outcome_unknown) {
      findings.push(
        note(
          `${data.outcome_unknown} calls have an unknown outcome`,
          "Check the target systems before repeating them",
        ),
      );
    }
    if (data.dispatched && !data.in_use) {
      findings.push(note(`${data.dispatched} calls were cut off; the next start marks them outcome_unknown`));
    }
  } catch (error) {
    data.error = describe(error);
    findings.push(problem(describe(error), "Move the file aside or choose another --journal path"));
  }
  return { title: "Journal", data, findings };
}
