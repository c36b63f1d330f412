// Private files that are rewritten while contained cells run (the journal, OAuth credential files) keep
// their inode. A contained cell is kept from reading such a file by a mount over its path, made when its
// worker starts; replacing the file by rename (writePrivateFileAtomic's last step) detaches that mount in
// every sandbox (Linux dissolves mounts on a dentry that is renamed over), after which the new file, and
// the temporary one written beside it, are readable by every worker started before. So an existing file
// is rewritten in place, with nothing written beside it. A rewrite must still never leave half a file: the
// new content is first written whole into a private directory no contained cell can see (the runtime
// directory, hidden from them as a whole), kept there until the file itself is on disk, and taken from
// there by a reader that finds the file torn (`unfinishedRewrite`) or put in place at the next start
// (`finishRewrite`). One rewrite of a file runs at a time (the journal's writer and an OAuth refresh
// each run alone).
import { createHash } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  type Stats,
  unlinkSync,
  writeSync,
} from "node:fs";
import { open, unlink } from "node:fs/promises";
import { join } from "node:path";
import { REWRITE_COPY_MAX_BYTES } from "../limits.ts";
import { writePrivateFileAtomic, writePrivateFileAtomicAsync } from "./atomic.ts";
import { ensurePrivateDirectory } from "./private-dir.ts";
import { readPrivateFile } from "./private-file.ts";
import { runtimeDirectory } from "./user-dirs.ts";

/** Opens an existing file for a rewrite in place: never through a link, never creating it. */
const REWRITE_FLAGS = constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function copiesDirectory(): string {
  return join(runtimeDirectory(), "rewrites");
}

/** Where the whole new content of a rewrite of `path` waits: one file per path. */
function copyPath(path: string): string {
  return join(copiesDirectory(), createHash("sha256").update(path).digest("hex").slice(0, 32));
}

/** The copy's text: the path it belongs to on the first line, the content after it. */
function copyText(path: string, content: string): string {
  return `${path}\n${content}`;
}

function copyOf(path: string): string | undefined {
  let text: string | null;
  try {
    text = readPrivateFile(copyPath(path), "A rewrite's copy", REWRITE_COPY_MAX_BYTES);
  } catch {
    return undefined;
  }
  if (text === null) return undefined;
  const newline = text.indexOf("\n");
  return newline >= 0 && text.slice(0, newline) === path ? text.slice(newline + 1) : undefined;
}

/**
 * Whether a file may be changed in place: a regular file of ours with no other name (a second name
 * would show the new content wherever it is).
 */
function rewritable(stat: Stats): boolean {
  const ours = typeof process.geteuid !== "function" || stat.uid === process.geteuid();
  return stat.isFile() && ours && stat.nlink === 1;
}

/** Opens `path` for a rewrite in place, or undefined when it must be written whole by rename instead. */
function openInPlace(path: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(path, REWRITE_FLAGS);
  } catch {
    return undefined;
  }
  if (rewritable(fstatSync(fd))) return fd;
  closeSync(fd);
  return undefined;
}

function writeWhole(fd: number, content: string): void {
  const bytes = Buffer.from(content);
  for (let offset = 0; offset < bytes.length; )
    offset += writeSync(fd, bytes, offset, bytes.length - offset, offset);
  ftruncateSync(fd, bytes.length);
  fsyncSync(fd);
}

/**
 * Replaces the content of the private file at `path` and keeps its inode. A file that does not exist
 * yet, or is not a plain file of ours, is written whole by rename, as writePrivateFileAtomic does.
 */
export function rewritePrivateFile(path: string, content: string): void {
  const fd = openInPlace(path);
  if (fd === undefined) {
    writePrivateFileAtomic(path, content);
    return;
  }
  try {
    ensurePrivateDirectory(copiesDirectory(), "The directory of rewrites in progress");
    writePrivateFileAtomic(copyPath(path), copyText(path, content));
    writeWhole(fd, content);
  } finally {
    closeSync(fd);
  }
  unlinkSync(copyPath(path));
}

/** The same without blocking the event loop on its writes and fsyncs (the journal's writer, OAuth). */
export async function rewritePrivateFileAsync(path: string, content: string): Promise<void> {
  let file: Awaited<ReturnType<typeof open>>;
  try {
    file = await open(path, REWRITE_FLAGS);
  } catch {
    await writePrivateFileAtomicAsync(path, content);
    return;
  }
  let inPlace = false;
  try {
    inPlace = rewritable(await file.stat());
    if (inPlace) {
      ensurePrivateDirectory(copiesDirectory(), "The directory of rewrites in progress");
      await writePrivateFileAtomicAsync(copyPath(path), copyText(path, content));
      const bytes = Buffer.from(content);
      for (let offset = 0; offset < bytes.length; )
        offset += (await file.write(bytes, offset, bytes.length - offset, offset)).bytesWritten;
      await file.truncate(bytes.length);
      await file.sync();
    }
  } finally {
    await file.close().catch(() => undefined);
  }
  if (inPlace) await unlink(copyPath(path));
  else await writePrivateFileAtomicAsync(path, content);
}

/**
 * The whole content of a rewrite of `path` that has not finished (still being written, or cut short by a
 * crash): what a reader that found the file itself torn reads instead. Undefined when there is none.
 */
export function unfinishedRewrite(path: string): string | undefined {
  return copyOf(path);
}

/**
 * Finishes a rewrite of `path` that a crash cut short, from its copy; nothing when there is none. For a
 * start-up path, before the file is read, by the one process that rewrites it (its lock's holder).
 */
export function finishRewrite(path: string): void {
  const content = copyOf(path);
  if (content === undefined) return;
  const fd = openInPlace(path);
  if (fd === undefined) writePrivateFileAtomic(path, content);
  else {
    try {
      writeWhole(fd, content);
    } finally {
      closeSync(fd);
    }
  }
  unlinkSync(copyPath(path));
}
