// A server's claim on a kept session's key (project + name): an flock on `<key>.lock` in the parking
// directory, held from the open until the session closes or the server exits (the kernel drops it when
// the server dies, even by SIGKILL), with the holder written beside it for the error a second server
// gets. Two servers therefore never both hold, start or adopt the same kept session.
import { closeSync, constants, ftruncateSync, openSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { PRIVATE_FILE_MODE } from "../fs/atomic.ts";
import { type FileLock, tryLockExclusive } from "../fs/lock.ts";
import { readPrivateFile } from "../fs/private-file.ts";
import { PARKING_RECORD_MAX_BYTES } from "../limits.ts";

const Holder = v.object({ pid: v.number(), session_id: v.string() });

export interface Claim {
  readonly key: string;
  release(): void;
}

/** The claim on `key`, or who holds it: `{ holder: pid }` (0 when it cannot be told). */
export function claimKey(
  dir: string,
  key: string,
  sessionId: string,
): Claim | { holder: number; sessionId: string | undefined } {
  const lock: FileLock | null = tryLockExclusive(join(dir, `${key}.lock`), "A kept session's claim");
  if (!lock) {
    const holder = readHolder(dir, key);
    return { holder: holder?.pid ?? 0, sessionId: holder?.session_id };
  }
  const holderPath = join(dir, `${key}.holder`);
  writeHolder(holderPath, JSON.stringify({ pid: process.pid, session_id: sessionId }));
  let held = true;
  return {
    key,
    release() {
      if (!held) return;
      held = false;
      try {
        unlinkSync(holderPath);
      } catch {}
      lock.release();
    },
  };
}

function readHolder(dir: string, key: string): v.InferOutput<typeof Holder> | undefined {
  try {
    const text = readPrivateFile(
      join(dir, `${key}.holder`),
      "A kept session's holder",
      PARKING_RECORD_MAX_BYTES,
    );
    const parsed = v.safeParse(Holder, JSON.parse(text ?? "null"));
    return parsed.success ? parsed.output : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Who holds the claim, for the message a second server gets: written under the lock, without fsync (it
 * only names the holder, and a holder that a power cut took holds nothing), never through a link, and
 * 0600 from its creation.
 */
function writeHolder(path: string, text: string): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, PRIVATE_FILE_MODE);
  try {
    ftruncateSync(fd, 0);
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}
