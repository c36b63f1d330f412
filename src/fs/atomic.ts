// Private files are written whole or not at all: a temp file created with mode 0600 (never chmod'ed
// later, so no moment of wider access), fsync, rename over the target, then fsync of the directory so
// the rename itself survives a power cut. node:fs is used on purpose: Bun's writer creates files 0644.
import { closeSync, constants, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

const CREATE_PRIVATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_PROGRAM_MODE = 0o700;

/** A sibling name no other writer uses; a leftover from a crash is recognisable by its suffix. */
function tempPath(path: string): string {
  return join(dirname(path), `.${basename(path)}.${crypto.randomUUID()}.part`);
}

const bytesOf = (content: string | Uint8Array) =>
  typeof content === "string" ? Buffer.from(content) : content;

/**
 * Synchronous form, for start-up paths and small caches. `mode` may add the owner's execute bit (a
 * helper program kept in the cache); it is still the mode the file is created with.
 */
export function writePrivateFileAtomic(
  path: string,
  content: string | Uint8Array,
  mode: typeof PRIVATE_FILE_MODE | typeof PRIVATE_PROGRAM_MODE = PRIVATE_FILE_MODE,
): void {
  const temp = tempPath(path);
  const fd = openSync(temp, CREATE_PRIVATE, mode);
  try {
    const bytes = bytesOf(content);
    for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temp, path);
  } catch (error) {
    try {
      closeSync(fd);
    } catch {}
    try {
      unlinkSync(temp);
    } catch {}
    throw error;
  }
  const dir = openSync(dirname(path), constants.O_RDONLY);
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/** The same write without blocking the event loop on fsync (the journal writer and OAuth use it). */
export async function writePrivateFileAtomicAsync(path: string, content: string | Uint8Array): Promise<void> {
  const temp = tempPath(path);
  const file = await open(temp, CREATE_PRIVATE, PRIVATE_FILE_MODE);
  let closed = false;
  try {
    await file.writeFile(bytesOf(content));
    await file.sync();
    await file.close();
    closed = true;
    await rename(temp, path);
  } catch (error) {
    if (!closed) await file.close().catch(() => {});
    await unlink(temp).catch(() => {});
    throw error;
  }
  const dir = await open(dirname(path), constants.O_RDONLY);
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
