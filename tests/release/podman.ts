// Podman for the container test, set up so that it runs on these machines and touches nothing of the
// host's own containers: a containers.conf of its own (runc, cgroupfs, no default rlimits: crun and the
// default rlimits are refused here), and storage, state and networks in a temporary directory that
// `close()` resets.
// No registry is reachable, so the base image is Debian's minbase with python3, made by mmdebstrap from
// the mirror apt uses, and kept between runs as a tarball and, imported from it, as an image store of its
// own that each run's podman reads without writing to it.
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
/** The base image imported into a containers-storage of its own, kept beside the tarball. */
const BASE_STORE = BASE_TARBALL.replace(/\.tar$/, ".podman-store");
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

/** A storage.conf for the overlay driver, with an additional read-only image store if given. */
function storageConf(graphroot: string, runroot: string, imageStore?: string): string {
  return [
    "[storage]",
    'driver = "overlay"',
    `graphroot = "${graphroot}"`,
    `runroot = "${runroot}"`,
    ...(imageStore === undefined ? [] : ["[storage.options]", `additionalimagestores = ["${imageStore}"]`]),
    "",
  ].join("\n");
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
    writeFileSync(storage, storageConf(join(this.dir, "graph"), join(this.dir, "run")));
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
  async podman(args: string[], timeoutMs = 120_000, env = this.env): Promise<string> {
    const result = await run([PODMAN as string, ...args], { env, timeoutMs });
    if (result.code !== 0)
      throw new Error(`podman ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
    return result.stdout;
  }

  /** What a container wrote so far, stdout and stderr together (podman logs replays each on its own). */
  async logs(name: string): Promise<string> {
    const result = await run([PODMAN as string, "logs", name], { env: this.env });
    return `${result.stdout}${result.stderr}`;
  }

  /**
   * Makes the Debian base image available as `name`, from the image store kept in the test cache, which this
   * podman reads as an additional, read-only store. Importing the 200 MiB tarball costs 4 to 7 s of CPU, so
   * the store is made once, and again only when it is missing or podman cannot find the image in it.
   */
  async importBase(name: string): Promise<void> {
    const store = join(testCacheDir(), BASE_STORE);
    if (existsSync(store)) {
      this.readImageStore(store);
      if (await this.hasImage(name)) return;
      this.readImageStore(undefined);
      rmSync(store, { recursive: true, force: true });
    }
    await this.makeImageStore(store, name);
    this.readImageStore(store);
    if (!(await this.hasImage(name)))
      throw new Error(`podman finds no ${name} in the new image store ${store}`);
  }

  private async hasImage(name: string): Promise<boolean> {
    const result = await run([PODMAN as string, "image", "exists", name], { env: this.env });
    return result.code === 0;
  }

  /** Adds `store` to this podman's storage as an additional image store, or takes it away (undefined). */
  private readImageStore(store: string | undefined): void {
    writeFileSync(
      this.env.CONTAINERS_STORAGE_CONF as string,
      storageConf(join(this.dir, "graph"), join(this.dir, "run"), store),
    );
  }

  /** Imports the base tarball as `name` into a new storage at `store`, made beside it and renamed. */
  private async makeImageStore(store: string, name: string): Promise<void> {
    const partial = `${store}.${process.pid}.partial`;
    // A podman of its own for the import: its storage is the partial store, its state stays in this.dir.
    // (A storage.conf rather than --root and --runroot: podman refuses a --runroot over 50 characters.)
    const conf = join(this.dir, "image-store.conf");
    writeFileSync(conf, storageConf(partial, join(this.dir, "image-store-run")));
    const env = { ...this.env, CONTAINERS_STORAGE_CONF: conf };
    const own = ["--tmpdir", join(this.dir, "image-store-libpod")];
    try {
      const tarball = await this.baseTarball();
      try {
        await this.podman([...own, "import", tarball, name], 300_000, env);
      } catch (error) {
        // A cached tarball that podman cannot read is rebuilt once; a fresh one that fails is a failure.
        rmSync(tarball, { force: true });
        rmSync(partial, { recursive: true, force: true });
        await this.podman([...own, "import", await this.baseTarball(), name], 300_000, env).catch(() => {
          throw error;
        });
      }
      // Podman's database of that import, which names the partial path; only the storage is shared.
      rmSync(join(partial, "libpod"), { recursive: true, force: true });
      try {
        renameSync(partial, store);
      } catch (error) {
        if (!existsSync(store)) throw error; // else another run made the store meanwhile: use that one
      }
    } finally {
      rmSync(partial, { recursive: true, force: true });
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
