// The journal on disk (--journal PATH; docs/broker.md "Effects, cancellation and the journal"). One server owns
// a journal file at a time: an exclusive flock on its `.lock` sibling, taken at start-up without waiting. An existing file is
// trusted only when it is private, ours, small and made of known keys; calls it still lists as
// dispatched were cut off by a crash and become outcome_unknown before anything else runs. Every change
// is then written whole, in place (fs/in-place.ts: a contained cell must not read the journal, and a
// rename over it would undo the mount that hides it), by one writer that folds changes arriving
// meanwhile into its next write.
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import * as v from "valibot";
import { ReplError } from "../errors.ts";
import { finishRewrite, rewritePrivateFile, rewritePrivateFileAsync } from "../fs/in-place.ts";
import { type FileLock, lockPathFor, tryLockExclusive } from "../fs/lock.ts";
import { PRIVATE_DIR_MODE } from "../fs/private-dir.ts";
import { PrivateFileError, readPrivateFile } from "../fs/private-file.ts";
import { JOURNAL_FILE_MAX_BYTES, JOURNAL_MAX_RECORDS } from "../limits.ts";
import { Journal, type JournalRecord, JournalRecordSchema, type JournalStore } from "./journal.ts";

export const JOURNAL_OWNED =
  "Broker journal is already owned by another runtime; choose a separate --journal path";
const LABEL = "Broker journal";
const JournalFileSchema = v.pipe(v.array(JournalRecordSchema), v.maxLength(JOURNAL_MAX_RECORDS));

/** The records of an existing journal file, or [] when there is none; throws a start-up error otherwise. */
export function readJournalFile(path: string): JournalRecord[] {
  let text: string | null;
  try {
    text = readPrivateFile(path, LABEL, JOURNAL_FILE_MAX_BYTES);
  } catch (error) {
    if (error instanceof PrivateFileError)
      throw new ReplError("JOURNAL_INVALID", `${error.message} (${path})`);
    throw error;
  }
  if (text === null) return [];
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw invalid(path, "it is not JSON");
  }
  const parsed = v.safeParse(JournalFileSchema, document);
  if (!parsed.success) throw invalid(path, whereInvalid(parsed.issues[0]));
  return parsed.output;
}

function invalid(path: string, why: string): ReplError {
  return new ReplError(
    "JOURNAL_INVALID",
    `Broker journal ${path} is not a valid journal (${why}); move it aside or choose another --journal path`,
  );
}

/** Where the first problem is, without echoing any value from the file. */
function whereInvalid(issue: v.BaseIssue<unknown>): string {
  const path = issue.path ?? [];
  if (path.length === 0) {
    return issue.type === "max_length"
      ? `more than ${JOURNAL_MAX_RECORDS} records`
      : "expected a JSON array of records";
  }
  const record = `record ${String(path[0]?.key)}`;
  const key = path[1]?.key;
  if (key === undefined) return `${record} is not an object`;
  if (issue.received === "undefined") return `${record} lacks "${String(key)}"`;
  if (issue.type === "strict_object") return `${record} has the unknown key "${String(key).slice(0, 64)}"`;
  return `${record} has an invalid "${String(key)}" (expected ${issue.expected})`;
}

/**
 * Takes the journal at `path` for this server: lock, validate, mark interrupted calls, and write the
 * result back before anything is served. Throws a ReplError meant for stderr and a non-zero exit.
 */
export function openDurableJournal(path: string): Journal {
  const lockPath = lockPathFor(path);
  if (lockPath === path) {
    throw new ReplError("JOURNAL_PATH", "--journal must not name a .lock file; name the journal itself");
  }
  if (!existsSync(dirname(path))) mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_DIR_MODE });
  let lock: FileLock | null;
  try {
    lock = tryLockExclusive(lockPath, LABEL);
  } catch (error) {
    if (error instanceof PrivateFileError) throw new ReplError("JOURNAL_LOCK", error.message);
    throw error;
  }
  if (!lock) throw new ReplError("JOURNAL_OWNED", JOURNAL_OWNED);
  try {
    finishRewrite(path);
    const records = readJournalFile(path);
    for (const record of records) if (record.status === "dispatched") record.status = "outcome_unknown";
    // In place: a contained cell must not read the journal, and a rename would undo what hides it.
    rewritePrivateFile(path, serialize(records));
    // The lock is held for the life of the process; the kernel drops it when the process ends.
    return new Journal(new JournalWriter(path), records);
  } catch (error) {
    lock.release();
    if (error instanceof ReplError) throw error;
    throw new ReplError(
      "JOURNAL_WRITE",
      `Broker journal ${path} cannot be written: ${(error as Error).message}`,
    );
  }
}

const serialize = (records: readonly JournalRecord[]) => `${JSON.stringify(records, null, 1)}\n`;

interface Waiter {
  version: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * One write at a time. Each persist() asks for the state as of its call; a write started later carries
 * every earlier change, so all waiters up to the version a write captured are answered by it.
 */
class JournalWriter implements JournalStore {
  private version = 0;
  private waiters: Waiter[] = [];
  private running = false;
  private records: readonly JournalRecord[] = [];

  constructor(private readonly path: string) {}

  persist(records: readonly JournalRecord[]): Promise<void> {
    this.records = records;
    const version = ++this.version;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ version, resolve, reject }));
    if (!this.running) void this.run();
    return done;
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.waiters.length > 0) {
      const version = this.version;
      let failure: unknown;
      try {
        await rewritePrivateFileAsync(this.path, serialize(this.records));
      } catch (error) {
        failure = error;
      }
      const answered = this.waiters.filter((waiter) => waiter.version <= version);
      this.waiters = this.waiters.filter((waiter) => waiter.version > version);
      for (const waiter of answered) {
        if (failure === undefined) waiter.resolve();
        else waiter.reject(failure);
      }
    }
    this.running = false;
  }
}
