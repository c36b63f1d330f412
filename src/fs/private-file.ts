// Reading a file that holds private state (the journal, OAuth credentials): it must be a regular file,
// not a symlink, owned by us, without group/other permission bits, and small. Anything else is refused
// with a reason the caller words for its own file, because a file someone else can write (or read)
// cannot be trusted with effect records or tokens.
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";

export type PrivateFileProblem =
  | "symlink"
  | "not_regular"
  | "foreign_owner"
  | "public_mode"
  | "too_large"
  | "unreadable";

export class PrivateFileError extends Error {
  constructor(
    readonly problem: PrivateFileProblem,
    message: string,
  ) {
    super(message);
    this.name = "PrivateFileError";
  }
}

/** What is wrong with a file's metadata, or null when it may hold private data. */
export function privateFileProblem(stat: Stats, maxBytes: number): PrivateFileProblem | null {
  if (stat.isSymbolicLink()) return "symlink";
  if (!stat.isFile()) return "not_regular";
  if (typeof process.geteuid === "function" && stat.uid !== process.geteuid()) return "foreign_owner";
  if ((stat.mode & 0o077) !== 0) return "public_mode";
  if (stat.size > maxBytes) return "too_large";
  return null;
}

/** A sentence for each problem, naming the file by `label` (e.g. "Broker journal") and the fix. */
export function describeProblem(problem: PrivateFileProblem, label: string, maxBytes: number): string {
  switch (problem) {
    case "symlink":
      return `${label} must not be a symbolic link; point the option at the real file`;
    case "not_regular":
      return `${label} must be a regular file`;
    case "foreign_owner":
      return `${label} must be owned by the user running repl-mcp`;
    case "public_mode":
      return `${label} must not be accessible to group or others; run chmod 600 on it`;
    case "too_large":
      return `${label} exceeds ${maxBytes} bytes`;
    case "unreadable":
      return `${label} cannot be read; check its permissions`;
  }
}

/**
 * The file's text, or null when it does not exist. Opened without following a symlink and without
 * blocking on a FIFO; checked on the opened descriptor, so the checks and the read see the same file.
 */
export function readPrivateFile(path: string, label: string, maxBytes: number): string | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return null;
    const problem = code === "ELOOP" ? "symlink" : "unreadable";
    throw new PrivateFileError(problem, describeProblem(problem, label, maxBytes));
  }
  try {
    const problem = privateFileProblem(fstatSync(fd), maxBytes);
    if (problem) throw new PrivateFileError(problem, describeProblem(problem, label, maxBytes));
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.length - length, length);
      if (read === 0) break;
      length += read;
      if (length > maxBytes) {
        throw new PrivateFileError("too_large", describeProblem("too_large", label, maxBytes));
      }
    }
    return buffer.subarray(0, length).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
