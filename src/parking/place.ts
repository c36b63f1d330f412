// Where parked sessions live: one private directory of the user's (0700, under the runtime directory)
// holding a record per kept worker, the secret an adopter must prove it knows, and, when their path
// fits, the guardians' sockets. Nothing here is ever a credential of anyone else's: the records name a
// project, a session and processes; the secret only opens this user's own parked workers.
import { closeSync, constants, linkSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { PRIVATE_FILE_MODE } from "../fs/atomic.ts";
import { ensurePrivateDirectory } from "../fs/private-dir.ts";
import { readPrivateFile } from "../fs/private-file.ts";
import { runtimeDirectory } from "../fs/user-dirs.ts";
import { PARKING_SECRET_BYTES, UNIX_SOCKET_PATH_MAX_BYTES } from "../limits.ts";

/** <runtime directory>/parked; not created. */
export function parkingDirectory(): string {
  return join(runtimeDirectory(), "parked");
}

/** The parking directory, created 0700 (or checked) first. */
export function openParkingDirectory(): string {
  const dir = parkingDirectory();
  ensurePrivateDirectory(dir, `The parked-sessions directory ${dir}`);
  return dir;
}

/** A session's key: its project and name, hashed to a short file-name-safe id. */
export function sessionKey(project: string, name: string): string {
  const hasher = new Bun.CryptoHasher("sha256");
  hasher.update(project);
  hasher.update("\0");
  hasher.update(name);
  return hasher.digest("hex").slice(0, 16);
}

/**
 * The secret an adopter proves it knows (an HMAC of the guardian's challenge): made once, 0600, beside
 * the records. Created by linking a complete temporary file into place, so two servers starting at
 * once end up reading the same one.
 */
export function parkingSecret(dir: string): string {
  const path = join(dir, "secret");
  const label = `The parking secret ${path}`;
  const existing = readPrivateFile(path, label, 1_024);
  if (existing !== null) return checked(existing.trim(), path);
  const temp = join(dir, `.secret.${crypto.randomUUID()}.part`);
  const bytes = crypto.getRandomValues(new Uint8Array(PARKING_SECRET_BYTES));
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, PRIVATE_FILE_MODE);
  try {
    writeSync(fd, `${Buffer.from(bytes).toString("hex")}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temp, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    unlinkSync(temp);
  }
  return checked((readPrivateFile(path, label, 1_024) ?? "").trim(), path);
}

function checked(secret: string, path: string): string {
  if (!/^[0-9a-f]{64}$/.test(secret)) throw new Error(`${path} is not a parking secret; remove it`);
  return secret;
}

/** The proof of knowing the secret for one challenge: HMAC-SHA256(secret, nonce), hex. */
export function proofFor(secret: string, nonce: string): string {
  const hmac = new Bun.CryptoHasher("sha256", secret);
  hmac.update(nonce);
  return hmac.digest("hex");
}

/** Compares two proofs in time that does not depend on where they differ. */
export function sameProof(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}

/** This boot of the machine (Linux); "" where unknown, and then only the pids tell a stale record. */
export function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "latin1").trim();
  } catch {
    return "";
  }
}

/**
 * Where a guardian listens: beside its record, unless that path is too long for a Unix socket (a deep
 * home directory), then in a private directory of the user's in /tmp.
 */
export function socketPath(dir: string, base: string): string {
  const beside = join(dir, `${base}.sock`);
  if (Buffer.byteLength(beside) <= UNIX_SOCKET_PATH_MAX_BYTES) return beside;
  const short = `/tmp/repl-mcp-${process.getuid?.() ?? "user"}`;
  ensurePrivateDirectory(short, `The short socket directory ${short}`);
  return join(short, `${base}.sock`);
}

/**
 * Signal 0: true while the process exists (EPERM: it exists, and is someone else's). A zombie, dead but
 * not yet reaped by whoever inherited it, is not alive (Linux tells, through /proc).
 */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat[stat.lastIndexOf(")") + 2] !== "Z";
  } catch {
    return true;
  }
}
