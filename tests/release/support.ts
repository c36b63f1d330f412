// Helpers for the release tests: temporary directories, running commands with a deadline, the shared
// test releases (of the real binary and of a stand-in), a fake release server on 127.0.0.1, and staging
// the release binary outside the checkout.
import {
  closeSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve, sep } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { buildRelease, hostTarget, type ReleaseResult, type ReleaseTarget } from "../../release/release.ts";
import { BINARY } from "../support/harness.ts";

export const ROOT = resolve(import.meta.dir, "../..");
/** install.sh as it is in the repository: it sources the plugin's fetch-release.sh beside it. */
export const CHECKOUT_INSTALL_SH = join(ROOT, "release", "install.sh");
export const VERSION = pkg.version;

/** A fresh directory under the system temp dir (never inside the checkout). */
export function makeTempDir(prefix = "repl-mcp-release-"): string {
  return mkdtempSync(join(realpathSync(tmpdir()), prefix));
}

export function isInside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !rel.startsWith(sep));
}

export { type RunOptions, type RunResult, run } from "../support/run.ts";

/** Resolves when `check()` returns true; rejects after the deadline. Waits on events, not sleeps. */
export async function waitFor(
  what: string,
  check: () => boolean,
  wake: () => Promise<unknown>,
  timeoutMs = 20_000,
) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`timed out waiting for ${what}`);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([wake(), new Promise((resolve) => (timer = setTimeout(resolve, left)))]);
    clearTimeout(timer);
  }
}

/** Names in a directory, sorted; [] if it does not exist. */
export function listDir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/** The platform the release tests build for: the host's own, so the binary can run here. */
export const TEST_TARGET: ReleaseTarget | undefined = hostTarget();

/**
 * The given target's release assets (binary, archive, install.sh, SHA256SUMS, npm packages), packed from
 * the binary every other test runs (dist/repl-mcp, or REPL_MCP_BINARY): `npm test` has just built it
 * with the release's own compile flags and profile, so compiling it again would test nothing new.
 *
 * Packing the 110 MiB binary costs seconds of CPU, so the test files share one copy: it is made once per
 * binary and release code, under a lock, in dist/test-release/<key>/, and only read afterwards. Whoever
 * makes a new one removes the others of its kind.
 *
 * With `standIn`, the same release code packs a stand-in binary instead (standInBinary below), for the
 * tests of how a release is downloaded, checked and installed rather than of what is installed: moving the
 * real binary through each of them costs seconds of CPU apiece.
 */
export async function sharedTestRelease(
  target: ReleaseTarget,
  options: { standIn?: boolean } = {},
): Promise<ReleaseResult> {
  const standIn = options.standIn ? standInBinary() : undefined;
  const key = standIn ? `${STAND_IN_PREFIX}${releaseKey(target, standIn)}` : releaseKey(target, BINARY);
  const parent = join(ROOT, "dist", "test-release");
  const done = join(parent, `${key}.json`);
  mkdirSync(parent, { recursive: true });
  for (;;) {
    if (existsSync(done)) return JSON.parse(readFileSync(done, "utf8")) as ReleaseResult;
    const lock = join(parent, `${key}.lock`);
    if (takeLock(lock)) {
      try {
        for (const entry of readdirSync(parent)) {
          const sameKind = entry.startsWith(STAND_IN_PREFIX) === (standIn !== undefined);
          if (sameKind && !entry.startsWith(key))
            rmSync(join(parent, entry), { recursive: true, force: true });
        }
        const outdir = join(parent, key);
        rmSync(outdir, { recursive: true, force: true });
        let binary = BINARY;
        if (standIn) {
          binary = `${outdir}.stand-in`;
          writeFileSync(binary, standIn);
        }
        const built = await buildRelease({
          targets: [target],
          outdir,
          log: () => {},
          prebuilt: { [target]: binary },
        });
        writeFileSync(`${done}.tmp`, JSON.stringify(built));
        renameSync(`${done}.tmp`, done);
        return built;
      } finally {
        if (standIn) rmSync(`${join(parent, key)}.stand-in`, { force: true });
        rmSync(lock, { recursive: true, force: true });
      }
    }
    await Bun.sleep(100);
  }
}

/** A stand-in release's directory names start with this; a real one's are hex digits only. */
const STAND_IN_PREFIX = "stand-in-";

/**
 * The stand-in release's binary: a shell script that answers `--version` as repl-mcp does, by printing the
 * version, which is all install.sh and the plugin's launcher run to check a binary before installing it.
 * Comment lines of pseudo-random base64 pad it to 1 MiB, so that its archive (0.8 MB) is larger than the
 * first chunk of an interrupted download (FIRST_CHUNK_BYTES). The same bytes every time, so its release
 * is made once and shared like the real one.
 */
function standInBinary(): Uint8Array {
  const noise = new Uint8Array(768 * 1024);
  let x = 0x2545f491; // xorshift32
  for (let i = 0; i < noise.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    noise[i] = x >>> 24;
  }
  return new TextEncoder().encode(
    [
      "#!/bin/sh",
      "# A stand-in for repl-mcp made by tests/release/support.ts: it answers --version and nothing else.",
      `if [ "$1" = --version ]; then echo ${VERSION}; exit 0; fi`,
      'echo "repl-mcp stand-in: only --version is answered" >&2',
      "exit 2",
      Buffer.from(noise)
        .toString("base64")
        .replace(/.{1,76}/g, "# $&\n"),
    ].join("\n"),
  );
}

/** The binary (a path, or a stand-in's bytes) and all under release/ that shapes the assets, hashed. */
function releaseKey(target: ReleaseTarget, binary: string | Uint8Array): string {
  const hash = new Bun.CryptoHasher("sha256").update(target);
  if (typeof binary === "string") hashFile(hash, binary);
  else hash.update(binary);
  const add = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) add(path);
      else hash.update(path).update(readFileSync(path));
    }
  };
  add(join(ROOT, "release"));
  return hash.digest("hex").slice(0, 24);
}

/**
 * Feeds a file to `hash` in 1 MiB pieces through one buffer. Reading the 110 MiB binary whole first costs
 * four times the CPU of hashing it (the page faults of a new buffer that size), and the release tests hash
 * it and the binaries installed from it many times.
 */
function hashFile(hash: Bun.CryptoHasher, path: string): void {
  const buffer = new Uint8Array(1 << 20);
  const fd = openSync(path, "r");
  try {
    for (;;) {
      const n = readSync(fd, buffer, 0, buffer.length, null);
      if (n === 0) break;
      hash.update(buffer.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
}

/** The lowercase hex SHA-256 of a file, as sha256sum prints it. */
export function sha256File(path: string): string {
  const hash = new Bun.CryptoHasher("sha256");
  hashFile(hash, path);
  return hash.digest("hex");
}

/** A directory as a lock, with the holder's pid inside; a lock whose holder is gone is taken over. */
function takeLock(lock: string): boolean {
  try {
    mkdirSync(lock);
    writeFileSync(join(lock, "pid"), String(process.pid));
    return true;
  } catch {
    let holder = 0;
    try {
      holder = Number(readFileSync(join(lock, "pid"), "utf8"));
    } catch {
      return false; // being made right now
    }
    if (holder > 0 && !existsSync(`/proc/${holder}`)) rmSync(lock, { recursive: true, force: true });
    return false;
  }
}

/**
 * For end-to-end checks of the release binary as users get it: copies `binary` into a new directory
 * outside the checkout and returns it with a separate, empty working directory to run it from.
 * The MCP smoke test (initialize, tools/list, one cell) should start the returned `binary` with
 * `cwd` — see the note at the end of install.test.ts.
 */
export function stageBinaryOutsideCheckout(binary: string, parent: string): { binary: string; cwd: string } {
  const binDir = join(parent, "bin");
  const cwd = join(parent, "cwd");
  mkdirSync(binDir, { recursive: true });
  mkdirSync(cwd, { recursive: true });
  const copy = join(binDir, "repl-mcp");
  copyFileSync(binary, copy);
  if (isInside(copy, ROOT) || isInside(cwd, ROOT))
    throw new Error(`${parent} is inside the checkout ${ROOT}`);
  return { binary: copy, cwd };
}

/** Hard-links `from` to `to` (copies across file systems). Never write through the result. */
export function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch {
    copyFileSync(from, to);
  }
}

export type Hold = { started: Promise<void>; release: () => void };

/** How much of a held file FakeReleaseServer sends before it stalls. */
export const FIRST_CHUNK_BYTES = 256 * 1024;

/**
 * A fake GitHub release: serves files from `dirs` (URL prefix -> directory), records every request
 * path, and 404s anything else. `holdAfterFirstChunk(path)` makes the server send the first part of
 * that file and then stall, to interrupt a download midway.
 */
export class FakeReleaseServer {
  readonly requests: string[] = [];
  private readonly server: ReturnType<typeof Bun.serve>;
  private readonly holds = new Map<
    string,
    { resolveStarted: () => void; closed: Promise<void>; close: () => void }
  >();
  private arrivals: Array<() => void> = [];

  constructor(private readonly mounts: Record<string, string>) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (request) => this.handle(request),
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  /** Resolves at the next request (for waitFor). */
  nextRequest(): Promise<void> {
    return new Promise((resolve) => this.arrivals.push(resolve));
  }

  holdAfterFirstChunk(path: string): Hold {
    let resolveStarted = () => {};
    const started = new Promise<void>((resolve) => (resolveStarted = resolve));
    let close = () => {};
    const closed = new Promise<void>((resolve) => (close = resolve));
    this.holds.set(path, { resolveStarted, closed, close });
    return { started, release: close };
  }

  stop(): void {
    for (const hold of this.holds.values()) hold.close();
    this.server.stop(true);
  }

  private async handle(request: Request): Promise<Response> {
    const path = decodeURIComponent(new URL(request.url).pathname);
    this.requests.push(path);
    for (const wake of this.arrivals.splice(0)) wake();
    const file = this.resolve(path);
    if (!file || !(await Bun.file(file).exists())) return new Response("not found\n", { status: 404 });
    const hold = this.holds.get(path);
    if (!hold) return new Response(Bun.file(file));
    const data = await Bun.file(file).bytes();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        controller.enqueue(data.subarray(0, FIRST_CHUNK_BYTES));
        hold.resolveStarted();
        await hold.closed; // stall until the test lets go (or the server stops)
        controller.close();
      },
    });
    return new Response(body, { headers: { "content-length": String(data.length) } });
  }

  private resolve(path: string): string | undefined {
    for (const [prefix, dir] of Object.entries(this.mounts)) {
      if (!path.startsWith(prefix)) continue;
      const file = resolve(dir, `.${sep}${path.slice(prefix.length)}`);
      if (isInside(file, dir) && file !== resolve(dir)) return file;
    }
    return undefined;
  }
}

/** Removes a directory tree, ignoring errors. */
export function removeTree(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
