// Advisory locks on lock files (a `.lock` sibling of the file they guard). flock(2) is used because
// the kernel drops it when the holder dies, even by SIGKILL, so a crash never leaves a stale lock, and
// the descriptor is close-on-exec, so children never inherit it. Node has no flock, so libc's is called
// through bun:ffi, loaded only when a lock is first taken.
import { dlopen, FFIType, read } from "bun:ffi";
import { closeSync, constants, fstatSync, openSync } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import { LOCK_RETRY_INTERVAL_MS } from "../limits.ts";
import { PRIVATE_FILE_MODE } from "./atomic.ts";
import { PrivateFileError } from "./private-file.ts";

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;
const EWOULDBLOCK = new Set([11, 35]); // Linux EAGAIN, Darwin EWOULDBLOCK
const EINTR = 4;

/** `journal.json` → `journal.lock`; a name without an extension gets `.lock` appended. */
export function lockPathFor(path: string): string {
  const name = basename(path);
  const extension = extname(name);
  return join(dirname(path), `${extension ? name.slice(0, -extension.length) : name}.lock`);
}

interface Libc {
  flock(fd: number, operation: number): number;
  errno(): number;
}

let libc: Libc | undefined;

function loadLibc(): Libc {
  const darwin = process.platform === "darwin";
  const names = darwin
    ? ["libc.dylib", "/usr/lib/libSystem.B.dylib"]
    : ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`];
  const errnoName = darwin ? "__error" : "__errno_location";
  let lastError: unknown;
  for (const name of names) {
    try {
      const { symbols } = dlopen(name, {
        flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
        [errnoName]: { args: [], returns: FFIType.ptr },
      });
      const errnoPointer = symbols[errnoName] as () => number;
      return {
        flock: (fd, operation) => symbols.flock(fd, operation) as number,
        errno: () => read.i32(errnoPointer() as never, 0),
      };
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`cannot load the C library for file locking: ${String(lastError)}`);
}

export interface FileLock {
  readonly path: string;
  release(): void;
}

/** Opens (creating 0600, never through a symlink) the lock file; refuses anything but a regular file. */
function openLockFile(path: string, label: string): number {
  let fd: number;
  try {
    fd = openSync(
      path,
      constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      PRIVATE_FILE_MODE,
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ELOOP") {
      throw new PrivateFileError("symlink", `${label} lock file ${path} is a symbolic link; remove it`);
    }
    throw new PrivateFileError("unreadable", `${label} lock file ${path} cannot be opened (${code})`);
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new PrivateFileError("not_regular", `${label} lock file ${path} must be a regular file`);
  }
  return fd;
}

/**
 * Takes an exclusive lock without waiting: the lock, or null when another process holds it. `label`
 * names the guarded file in errors (e.g. "Broker journal").
 */
export function tryLockExclusive(path: string, label: string): FileLock | null {
  libc ??= loadLibc();
  const fd = openLockFile(path, label);
  for (;;) {
    if (libc.flock(fd, LOCK_EX | LOCK_NB) === 0) break;
    const errno = libc.errno();
    if (errno === EINTR) continue;
    closeSync(fd);
    if (EWOULDBLOCK.has(errno)) return null;
    throw new PrivateFileError("unreadable", `${label} lock file ${path} cannot be locked (errno ${errno})`);
  }
  let held = true;
  return {
    path,
    release() {
      if (!held) return;
      held = false;
      libc?.flock(fd, LOCK_UN);
      closeSync(fd);
    },
  };
}

/** Waits (polling, so the event loop keeps running) up to `timeoutMs` for the lock; null on timeout. */
export async function lockExclusive(
  path: string,
  label: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<FileLock | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lock = tryLockExclusive(path, label);
    if (lock || Date.now() >= deadline || signal?.aborted) return lock;
    await Bun.sleep(Math.min(LOCK_RETRY_INTERVAL_MS, Math.max(1, deadline - Date.now())));
  }
}
