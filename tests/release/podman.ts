// Podman for the container test, set up so that it runs on these machines and touches nothing of the
// host's own containers: a containers.conf of its own (runc, cgroupfs, no default rlimits: crun and the
// default rlimits are refused here), and storage, state and networks in a temporary directory that
// `close()` resets.
// No registry is reachable, so the base image is Debian's minbase with python3, made by mmdebstrap from
// the mirror apt uses, and kept as a tarball between runs.
import { existsSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { debianMirror, testCacheDir } from "../support/debian.ts";
import { makeTempDir, removeTree, run } from "./support.ts";

const PODMAN = Bun.which("podman");
const MMDEBSTRAP = Bun.which("mmdebstrap");

/** What the base image is made of; the cached tarball is named after it, so a change makes a new one. */
const BASE_SUITE = "bookworm";
const BASE_PACKAGES = ["python3"];
const BASE_TARBALL = `debian-${BASE_SUITE}-minbase-${BASE_PACKAGES.join("-")}.tar`;
/** The base tarball of a successful mmdebstrap run is about 200 MiB; anything much smaller is broken. */
const BASE_MIN_BYTES = 50 * 1024 * 1024;

/** Why the container test cannot run on this machine, or undefined when it can. */
export function podmanUnavailable(): string | undefined {
  if (process.platform !== "linux")
    return `podman runs Linux containers natively only on Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return "it needs root: rootful podman and mmdebstrap's root mode";
  if (PODMAN === null) return "podman is not installed (Debian: apt-get install podman runc)";
  if (Bun.which("runc") === null) return "runc is not installed (Debian: apt-get install runc)";
  if (MMDEBSTRAP === null && !existsSync(join(testCacheDir(), BASE_TARBALL)))
    return "mmdebstrap is not installed (Debian: apt-get install mmdebstrap) and no base image is cached";
  return undefined;
}

export class Podman {
  readonly dir = makeTempDir("repl-mcp-podman-");
  readonly env: Record<string, string>;

  constructor() {
    const conf = join(this.dir, "containers.conf");
    const storage = join(this.dir, "storage.conf");
    writeFileSync(
      conf,
      [
        "[containers]",
        "default_ulimits = []",
        "[engine]",
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        // Podman's run-time state and network definitions live here too, not in /run/libpod and
        // /etc/containers: `system reset` in close() then removes only what this test made.
        `tmp_dir = "${join(this.dir, "libpod")}"`,
        "[network]",
        `network_config_dir = "${join(this.dir, "networks")}"`,
        "",
      ].join("\n"),
    );
    writeFileSync(
      storage,
      [
        "[storage]",
        'driver = "overlay"',
        `graphroot = "${join(this.dir, "graph")}"`,
        `runroot = "${join(this.dir, "run")}"`,
        "",
      ].join("\n"),
    );
    this.env = {
      PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
      HOME: process.env.HOME ?? homedir(),
      CONTAINERS_CONF: conf,
      CONTAINERS_STORAGE_CONF: storage,
      TMPDIR: join(this.dir, "tmp"),
    };
    mkdirSync(this.env.TMPDIR as string);
  }

  /** Runs podman; throws with its stderr unless it exits 0. */
  async podman(args: string[], timeoutMs = 120_000): Promise<string> {
    const result = await run([PODMAN as string, ...args], { env: this.env, timeoutMs });
    if (result.code !== 0)
      throw new Error(`podman ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
    return result.stdout;
  }

  /** What a container wrote so far, stdout and stderr together (podman logs replays each on its own). */
  async logs(name: string): Promise<string> {
    const result = await run([PODMAN as string, "logs", name], { env: this.env });
    return `${result.stdout}${result.stderr}`;
  }

  /** Imports the Debian base as `name`, building and caching its tarball when there is none yet. */
  async importBase(name: string): Promise<void> {
    const tarball = await this.baseTarball();
    try {
      await this.podman(["import", tarball, name], 300_000);
    } catch (error) {
      // A cached tarball that podman cannot read is rebuilt once; a fresh one that fails is a failure.
      rmSync(tarball, { force: true });
      await this.podman(["import", await this.baseTarball(), name], 300_000).catch(() => {
        throw error;
      });
    }
  }

  private async baseTarball(): Promise<string> {
    const dir = testCacheDir();
    const tarball = join(dir, BASE_TARBALL);
    if (existsSync(tarball) && statSync(tarball).size >= BASE_MIN_BYTES) return tarball;
    if (MMDEBSTRAP === null) throw new Error("mmdebstrap is not installed and no base image is cached");
    mkdirSync(dir, { recursive: true });
    // Written beside its final name and renamed: a run cut short never leaves a partial tarball to reuse.
    const partial = `${tarball}.${process.pid}.partial`;
    try {
      const result = await run(
        [
          MMDEBSTRAP,
          "--variant=minbase",
          "--format=tar",
          `--include=${BASE_PACKAGES.join(",")}`,
          BASE_SUITE,
          partial,
          debianMirror(),
        ],
        { env: this.env, timeoutMs: 900_000 },
      );
      if (result.code !== 0)
        throw new Error(`mmdebstrap exited ${result.code}: ${result.stderr.trim().slice(-2000)}`);
      if (statSync(partial).size < BASE_MIN_BYTES)
        throw new Error(`mmdebstrap wrote a tarball of only ${statSync(partial).size} bytes`);
      renameSync(partial, tarball);
    } finally {
      rmSync(partial, { recursive: true, force: true });
    }
    return tarball;
  }

  /** Removes every container, image and mount of this storage, then the directory itself. */
  async close(): Promise<void> {
    await run([PODMAN as string, "system", "reset", "--force"], { env: this.env, timeoutMs: 120_000 }).catch(
      () => undefined,
    );
    removeTree(this.dir);
  }
}
