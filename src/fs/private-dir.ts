// A directory for private files (OAuth credentials, the journal): created 0700 when missing; an
// existing one must be a real directory that group and others cannot enter.
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
