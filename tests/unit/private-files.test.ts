// The private-file helpers shared by the journal and OAuth: atomic 0600 writes, guarded reads, locks.
import { afterEach, expect, test } from "bun:test";
import {
  chmodSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { writePrivateFileAtomic, writePrivateFileAtomicAsync } from "../../src/fs/atomic.ts";
import {
  finishRewrite,
  rewritePrivateFile,
  rewritePrivateFileAsync,
  unfinishedRewrite,
} from "../../src/fs/in-place.ts";
import { lockExclusive, lockPathFor, tryLockExclusive } from "../../src/fs/lock.ts";
import { ensurePrivateDirectory } from "../../src/fs/private-dir.ts";
import { PrivateFileError, readPrivateFile } from "../../src/fs/private-file.ts";
import { tempDir } from "../support/harness.ts";

const dirs: string[] = [];
function dir(): string {
  const made = tempDir("repl-mcp-fs-");
  dirs.push(made);
  return made;
}
afterEach(() => {
  for (const made of dirs.splice(0)) rmSync(made, { recursive: true, force: true });
});

function problemOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    if (error instanceof PrivateFileError) return error.problem;
    throw error;
  }
  throw new Error("expected a PrivateFileError");
}

test("atomic writes create 0600 files even under a permissive umask and leave no temp files", async () => {
  const base = dir();
  const previous = process.umask(0);
  try {
    writePrivateFileAtomic(join(base, "a.json"), "one");
    await writePrivateFileAtomicAsync(join(base, "b.json"), new TextEncoder().encode("two"));
  } finally {
    process.umask(previous);
  }
  expect(statSync(join(base, "a.json")).mode & 0o777).toBe(0o600);
  expect(statSync(join(base, "b.json")).mode & 0o777).toBe(0o600);
  await writePrivateFileAtomicAsync(join(base, "a.json"), "replaced");
  expect(readFileSync(join(base, "a.json"), "utf8")).toBe("replaced");
  expect(readdirSync(base).sort()).toEqual(["a.json", "b.json"]);
});

test("a failed atomic write leaves the old file intact and no temp file", async () => {
  const base = dir();
  writePrivateFileAtomic(join(base, "keep.json"), "old");
  // The target is a directory: rename fails after the temp file was written.
  mkdirSync(join(base, "target"));
  writeFileSync(join(base, "target", "x"), "");
  await expect(writePrivateFileAtomicAsync(join(base, "target"), "new")).rejects.toThrow();
  expect(() => writePrivateFileAtomic(join(base, "target"), "new")).toThrow();
  expect(readdirSync(base).sort()).toEqual(["keep.json", "target"]);
  expect(readFileSync(join(base, "keep.json"), "utf8")).toBe("old");
});

test("private reads refuse symlinks, public modes, directories and oversized files", () => {
  const base = dir();
  const good = join(base, "good.json");
  writePrivateFileAtomic(good, "[]");
  expect(readPrivateFile(good, "Test file", 100)).toBe("[]");
  expect(readPrivateFile(join(base, "absent.json"), "Test file", 100)).toBeNull();

  symlinkSync(good, join(base, "link.json"));
  expect(problemOf(() => readPrivateFile(join(base, "link.json"), "Test file", 100))).toBe("symlink");

  writeFileSync(join(base, "public.json"), "[]");
  chmodSync(join(base, "public.json"), 0o644);
  expect(problemOf(() => readPrivateFile(join(base, "public.json"), "Test file", 100))).toBe("public_mode");

  expect(problemOf(() => readPrivateFile(base, "Test file", 100))).toBe("not_regular");

  writePrivateFileAtomic(join(base, "big.json"), "x".repeat(101));
  expect(problemOf(() => readPrivateFile(join(base, "big.json"), "Test file", 100))).toBe("too_large");
  expect(() => readPrivateFile(join(base, "public.json"), "Test file", 100)).toThrow(
    "Test file must not be accessible to group or others; run chmod 600 on it",
  );
});

test("lock files: named after the guarded file, exclusive, released, never through a symlink", async () => {
  const base = dir();
  expect(lockPathFor("/x/journal.json")).toBe("/x/journal.lock");
  expect(lockPathFor("/x/journal")).toBe("/x/journal.lock");
  expect(lockPathFor("/x/.journal")).toBe("/x/.journal.lock");

  const path = join(base, "journal.lock");
  const first = tryLockExclusive(path, "Test journal");
  expect(first).not.toBeNull();
  expect(statSync(path).mode & 0o777).toBe(0o600);
  // flock treats each open of the file separately, so a second open in this process contends too.
  expect(tryLockExclusive(path, "Test journal")).toBeNull();
  const waiting = lockExclusive(path, "Test journal", 5_000);
  first?.release();
  const second = await waiting;
  expect(second).not.toBeNull();
  expect(await lockExclusive(path, "Test journal", 50)).toBeNull();
  second?.release();

  symlinkSync(join(base, "elsewhere"), join(base, "link.lock"));
  expect(problemOf(() => tryLockExclusive(join(base, "link.lock"), "Test journal"))).toBe("symlink");
  expect(readdirSync(base)).not.toContain("elsewhere");
});

test("private directories are created 0700; a group-readable one is refused", () => {
  const base = dir();
  const created = join(base, "a", "b");
  ensurePrivateDirectory(created, "OAuth store directory");
  expect(statSync(created).mode & 0o777).toBe(0o700);
  mkdirSync(join(base, "open"), { mode: 0o755 });
  chmodSync(join(base, "open"), 0o755);
  expect(() => ensurePrivateDirectory(join(base, "open"), "OAuth store directory")).toThrow(
    "OAuth store directory must have permissions 0700",
  );
});

test("a rewrite in place keeps the file's inode and writes nothing beside it", async () => {
  const base = dir();
  const path = join(base, "journal.json");
  writePrivateFileAtomic(path, "first, and longer than what follows");
  const inode = statSync(path).ino;
  rewritePrivateFile(path, "second");
  expect([readFileSync(path, "utf8"), statSync(path).ino]).toEqual(["second", inode]);
  await rewritePrivateFileAsync(path, "third");
  expect([readFileSync(path, "utf8"), statSync(path).ino]).toEqual(["third", inode]);
  expect(readdirSync(base)).toEqual(["journal.json"]);
  expect(statSync(path).mode & 0o777).toBe(0o600);
  // A file that does not exist yet is written whole, as before.
  await rewritePrivateFileAsync(join(base, "new.json"), "new");
  expect(readFileSync(join(base, "new.json"), "utf8")).toBe("new");
});

test("a rewrite cut short is read from its copy and finished at the next start", () => {
  const base = dir();
  const runtime = join(base, "run");
  const path = join(base, "credentials.json");
  writePrivateFileAtomic(path, '{"old": true}');
  const xdg = process.env.XDG_RUNTIME_DIR;
  process.env.XDG_RUNTIME_DIR = runtime;
  mkdirSync(runtime, { mode: 0o700 });
  try {
    expect(unfinishedRewrite(path)).toBeUndefined();
    // What a crash between the copy and the end of the write in place leaves: a torn file and its copy.
    rewritePrivateFile(path, '{"new": "whole"}');
    const copies = join(runtime, "repl-mcp", "rewrites");
    expect(readdirSync(copies)).toEqual([]);
    writeFileSync(path, '{"new": "who');
    const digest = new Bun.CryptoHasher("sha256").update(path).digest("hex").slice(0, 32);
    writePrivateFileAtomic(join(copies, digest), `${path}\n{"new": "whole"}`);
    expect(unfinishedRewrite(path)).toBe('{"new": "whole"}');
    const inode = statSync(path).ino;
    finishRewrite(path);
    expect([readFileSync(path, "utf8"), statSync(path).ino]).toEqual(['{"new": "whole"}', inode]);
    expect(readdirSync(copies)).toEqual([]);
    expect(unfinishedRewrite(path)).toBeUndefined();
  } finally {
    if (xdg === undefined) delete process.env.XDG_RUNTIME_DIR;
    else process.env.XDG_RUNTIME_DIR = xdg;
  }
});
