// Helpers for the release tests: temporary directories, running commands with a deadline, a fake
// release server on 127.0.0.1, and staging the release binary outside the checkout.
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
 * makes a new one removes the others.
 */
export async function sharedTestRelease(target: ReleaseTarget): Promise<ReleaseResult> {
  const key = releaseKey(target);
  const parent = join(ROOT, "dist", "test-release");
  const done = join(parent, `${key}.json`);
  mkdirSync(parent, { recursive: true });
  for (;;) {
    if (existsSync(done)) return JSON.parse(readFileSync(done, "utf8")) as ReleaseResult;
    const lock = join(parent, `${key}.lock`);
    if (takeLock(lock)) {
      try {
        for (const entry of readdirSync(parent)) {
          if (!entry.startsWith(key)) rmSync(join(parent, entry), { recursive: true, force: true });
        }
        const outdir = join(parent, key);
        rmSync(outdir, { recursive: true, force: true });
        const built = await buildRelease({
          targets: [target],
          outdir,
          log: () => {},
          prebuilt: { [target]: BINARY },
        });
        writeFileSync(`${done}.tmp`, JSON.stringify(built));
        renameSync(`${done}.tmp`, done);
        return built;
      } finally {
        rmSync(lock, { recursive: true, force: true });
      }
    }
    await Bun.sleep(100);
  }
}

/** The binary and everything under release/ that shapes the assets, hashed. */
function releaseKey(target: ReleaseTarget): string {
  const hash = new Bun.CryptoHasher("sha256").update(target);
  hashFile(hash, BINARY);
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
        controller.enqueue(data.subarray(0, 256 * 1024));
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
