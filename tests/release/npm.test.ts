// `npx -y repl-mcp` end to end: the npm packages of a release built here are published to a local
// Verdaccio (the devDependency, on 127.0.0.1 with its own config and storage), then run through the real
// npm with an isolated cache and HOME: `npx -y repl-mcp --version`, and an MCP session through the
// command line a client configuration holds. The bin npx runs must be the native binary itself, with no
// install script involved (npm 11 warns about a dependency's install scripts, or refuses them).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { MAIN_PACKAGE, platformPackageName } from "../../release/npm.ts";
import type { ReleaseResult } from "../../release/release.ts";
import { Harness, waitFor } from "../support/harness.ts";
import {
  makeTempDir,
  ROOT,
  removeTree,
  run,
  sha256File,
  sharedTestRelease,
  TEST_TARGET,
  VERSION,
} from "./support.ts";

const NODE = Bun.which("node");
const NPM = Bun.which("npm");
const NPX = Bun.which("npx");
const VERDACCIO = join(ROOT, "node_modules", "verdaccio", "bin", "verdaccio");
const UNAVAILABLE =
  TEST_TARGET === undefined
    ? `no release target for ${process.platform}-${process.arch}`
    : NODE === null || NPM === null || NPX === null
      ? "node, npm or npx is not on PATH"
      : undefined;
if (UNAVAILABLE) console.warn(`skipped: the npx test, because ${UNAVAILABLE}`);

const target = TEST_TARGET ?? "linux-x64";
const PLATFORM_PACKAGE = platformPackageName(target);

let dir = "";
let release: ReleaseResult;
let registry = "";
let verdaccio: ReturnType<typeof Bun.spawn> | undefined;
/** The environment every npm command of the test runs with: the local registry, nothing of the user's. */
let npmEnv: Record<string, string> = {};

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

async function startVerdaccio(): Promise<void> {
  const home = join(dir, "verdaccio");
  mkdirSync(home);
  const config = join(home, "config.yaml");
  writeFileSync(
    config,
    [
      `storage: ${join(home, "storage")}`,
      "auth:",
      "  htpasswd:",
      `    file: ${join(home, "htpasswd")}`,
      "uplinks: {}", // nothing is fetched from the internet: a package not published here does not exist
      "packages:",
      "  '**':",
      "    access: $all",
      "    publish: $all",
      "max_body_size: 512mb", // a platform package carries a ~100 MiB binary
      "log: { type: stdout, format: pretty, level: warn }",
      "",
    ].join("\n"),
  );
  const port = await freePort();
  registry = `http://127.0.0.1:${port}/`;
  verdaccio = Bun.spawn([NODE as string, VERDACCIO, "--config", config, "--listen", `127.0.0.1:${port}`], {
    cwd: home,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  await waitFor(
    async () => {
      if (verdaccio?.exitCode !== null) throw new Error(`verdaccio exited ${verdaccio?.exitCode}`);
      return (await fetch(`${registry}-/ping`).catch(() => undefined))?.ok === true;
    },
    { timeoutMs: 60_000, intervalMs: 100, what: "Verdaccio to answer /-/ping" },
  );
}

async function npm(args: string[], cwd = join(dir, "work"), env: Record<string, string> = {}) {
  return await run([NPM as string, ...args], { cwd, env: { ...npmEnv, ...env }, timeoutMs: 300_000 });
}

beforeAll(async () => {
  if (UNAVAILABLE) return;
  dir = makeTempDir("repl-mcp-npm-");
  release = await sharedTestRelease(target);
  await startVerdaccio();
  const home = join(dir, "home");
  for (const sub of [home, join(dir, "work")]) mkdirSync(sub);
  const npmrc = join(home, ".npmrc");
  // Verdaccio lets anyone publish here; npm still wants a token for the registry before it sends one.
  writeFileSync(npmrc, `registry=${registry}\n//${registry.slice("http://".length)}:_authToken=local-test\n`);
  const globalrc = join(home, "npmrc-global");
  writeFileSync(globalrc, "");
  npmEnv = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    npm_config_userconfig: npmrc,
    npm_config_globalconfig: globalrc,
    npm_config_registry: registry,
    npm_config_cache: join(home, "npm-cache"),
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
  };
  // Platform packages first, as a real release must: the main package names them.
  for (const pkg of release.npmPackages) {
    const published = await npm(["publish", pkg.path]);
    if (published.code !== 0) throw new Error(`npm publish ${pkg.path}: ${published.stderr}`);
  }
}, 600_000);

afterAll(async () => {
  if (verdaccio && verdaccio.exitCode === null) {
    verdaccio.kill("SIGTERM");
    await verdaccio.exited;
  }
  if (dir) removeTree(dir);
});

/** What the registry publishes about a package (its "packument"). */
async function packument(name: string): Promise<Record<string, any>> {
  const response = await fetch(`${registry}${name.replace("/", "%2f")}`);
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, any>;
}

/** The one directory npx installed the package into, under the isolated cache. */
function npxInstall(): string {
  const root = join(npmEnv.npm_config_cache as string, "_npx");
  const dirs = readdirSync(root);
  expect(dirs).toHaveLength(1);
  return join(root, dirs[0] as string, "node_modules");
}

const builtBinarySha = () => sha256File(join(release.outdir, `repl-mcp-${target}`));

describe.skipIf(UNAVAILABLE !== undefined)("npx -y repl-mcp", () => {
  test("the published packages: a main package without scripts, and a platform package with the binary", async () => {
    expect(release.npmPackages.map((pkg) => pkg.name)).toEqual([PLATFORM_PACKAGE, MAIN_PACKAGE]);
    const main = await packument(MAIN_PACKAGE);
    const manifest = main.versions[VERSION];
    expect(main["dist-tags"].latest).toBe(VERSION);
    expect(manifest.bin).toEqual({ "repl-mcp": "bin/repl-mcp" });
    expect(manifest.optionalDependencies).toEqual({ [PLATFORM_PACKAGE]: VERSION });
    expect(manifest.scripts ?? {}).toEqual({});
    const platform = (await packument(PLATFORM_PACKAGE)).versions[VERSION];
    const [os, cpu] = target.split("-");
    expect([platform.os, platform.cpu]).toEqual([[os], [cpu]]);
    if (os === "linux") expect(platform.libc).toEqual(["glibc"]);
    expect(platform.bin).toEqual({ "repl-mcp": "repl-mcp" });
    expect(platform.scripts ?? {}).toEqual({});
  });

  test("prints its version, and the bin npx runs is the native binary itself", async () => {
    // Under npm's strictest script policy, which fails an install with any unreviewed install script.
    const result = await run([NPX as string, "-y", "repl-mcp", "--version"], {
      cwd: join(dir, "work"),
      env: { ...npmEnv, npm_config_strict_allow_scripts: "true" },
      timeoutMs: 300_000,
    });
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toContain(VERSION);
    expect(result.stderr).not.toContain("install-scripts");
    expect(result.stderr).not.toContain("allowScripts");

    const modules = npxInstall();
    const bin = join(modules, ".bin", "repl-mcp");
    expect(readlinkSync(bin)).toBe(`../${PLATFORM_PACKAGE}/repl-mcp`);
    expect(sha256File(realpathSync(bin))).toBe(builtBinarySha());
  }, 300_000);

  test("an MCP session through the command line of a client configuration", async () => {
    // { "command": "npx", "args": ["-y", "repl-mcp"] }
    const h = await Harness.start({ binary: NPX as string, args: ["-y", "repl-mcp"], env: npmEnv });
    try {
      expect(h.client.getServerVersion()?.version).toBe(VERSION);
      expect((await h.run("import sys\n[6 * 7, sys.version_info >= (3, 10)]")).value).toEqual([42, true]);

      // npx's own Node process is the only one: below it are npm's shell, the binary (server and
      // guardian) and Python.
      const native = realpathSync(join(npxInstall(), PLATFORM_PACKAGE, "repl-mcp"));
      const below = descendants(h.serverPid).map((pid) => ({ pid, exe: exe(pid) }));
      expect(exe(h.serverPid)).toBe(realpathSync(NODE as string));
      expect(below.filter(({ exe }) => exe === realpathSync(NODE as string))).toEqual([]);
      expect(below.filter(({ exe }) => exe === native).length).toBeGreaterThanOrEqual(2);
    } finally {
      await h.close(); // also waits until no process carrying the session's tag is left
    }
  }, 300_000);

  test("installed globally, the main package's sh fallback runs the same binary", async () => {
    const prefix = join(dir, "global");
    const installed = await npm(["install", "--global", "--prefix", prefix, "repl-mcp"]);
    expect(installed.code).toBe(0);
    expect(installed.stderr).not.toContain("install-scripts");
    const bin = join(prefix, "bin", "repl-mcp");
    expect(readlinkSync(bin)).toBe("../lib/node_modules/repl-mcp/bin/repl-mcp");
    const version = await run([bin, "--version"], { cwd: prefix, env: npmEnv });
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toContain(VERSION);
  }, 300_000);

  test("without the platform package it says so in one line and exits 1", async () => {
    const prefix = join(dir, "no-optional");
    expect((await npm(["install", "--omit=optional", "--prefix", prefix, "repl-mcp"])).code).toBe(0);
    const result = await run([join(prefix, "node_modules", ".bin", "repl-mcp"), "--version"], {
      cwd: prefix,
      env: npmEnv,
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    const lines = result.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toStartWith(
      `repl-mcp: error: npm installed no binary for ${target} (${PLATFORM_PACKAGE})`,
    );
  }, 300_000);
});

/** Every process below `root`, by walking /proc's parent links. */
function descendants(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    for (const [child, parent] of parents) {
      if (parent === pid) {
        found.push(child);
        queue.push(child);
      }
    }
  }
  return found;
}

function exe(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return "";
  }
}
