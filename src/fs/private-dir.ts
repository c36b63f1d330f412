// A directory for private files (OAuth credentials, the journal, the worker cache, a generated HTTP
// token): created 0700 when missing; an existing one must be a real directory of ours that group and
// others cannot enter, since whoever can write into it can replace what we later read from it.
import { lstatSync, mkdirSync } from "node:fs";
import { PrivateFileError } from "./private-file.ts";

export const PRIVATE_DIR_MODE = 0o700;

/** Creates `path` (and missing parents) with mode 0700, or checks the existing one. */
export function ensurePrivateDirectory(path: string, label: string): void {
  let stat = lstatOrNull(path);
  if (!stat) {
    mkdirSync(path, { recursive: true, mode: PRIVATE_DIR_MODE });
    stat = lstatOrNull(path);
  }
  if (!stat?.isDirectory()) {
    throw new PrivateFileError("not_regular", `${label} must be a real directory, not a file or a link`);
  }
  if (typeof process.geteuid === "function" && stat.uid !== process.geteuid()) {
    throw new PrivateFileError("foreign_owner", `${label} must be owned by the user running repl-mcp`);
  }
  if ((stat.mode & 0o077) !== 0) {
    throw new PrivateFileError("public_mode", `${label} must have permissions 0700`);
  }
}

function lstatOrNull(path: string) {
  try {
    return lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}
