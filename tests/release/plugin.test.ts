// The Claude Code plugin: its launcher against a local mirror of a release built here, and the real
// Claude Code (the devDependency) in an isolated HOME adding the repository as a marketplace, installing
// the plugin and connecting to its server. The launcher must fetch and verify the release once, exec it,
// never touch the network again, and refuse a tampered asset in one line with nothing installed.
//
// Every test serves the real release except the one about the GitHub URL the launcher fetches from: it
// installs the stand-in release (support.ts), as installing the real binary once more costs a second and a
// half of CPU and shows nothing the first start does not.
import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import marketplace from "../../.claude-plugin/marketplace.json" with { type: "json" };
import { packExecutable } from "../../release/archive.ts";
import plugin from "../../release/plugin/.claude-plugin/plugin.json" with { type: "json" };
import { archiveAssetName, CHECKSUMS_NAME } from "../../release/release.ts";
import { Harness, taggedPids, waitFor } from "../support/harness.ts";
import {
  FakeReleaseServer,
  linkOrCopy,
  listDir,
  makeTempDir,
  ROOT,
  removeTree,
  run,
  sha256File,
  sharedTestRelease,
  TEST_TARGET,
  VERSION,
} from "./support.ts";

const PLUGIN_DIR = join(ROOT, "release", "plugin");
const LAUNCHER = join(PLUGIN_DIR, "scripts", "launch.sh");
const CLAUDE = join(ROOT, "node_modules", ".bin", "claude");
const SH = Bun.which("sh") ?? "/bin/sh";
const target = TEST_TARGET ?? "linux-x64";
const ARCHIVE = archiveAssetName(target);
const ERROR_PREFIX = "repl-mcp launcher: error: ";

let buildDir = "";
let standInDir = "";

beforeAll(async () => {
  if (TEST_TARGET === undefined) return;
  buildDir = (await sharedTestRelease(target)).outdir;
  standInDir = (await sharedTestRelease(target, { standIn: true })).outdir;
}, 240_000);

interface Fixture {
  root: string;
  home: string;
  cache: string;
  tmp: string;
  www: string;
  env: Record<string, string>;
  server: FakeReleaseServer;
}

const fixtures: Fixture[] = [];

afterEach(() => {
  for (const fx of fixtures.splice(0)) {
    fx.server.stop();
    removeTree(fx.root);
  }
});

/**
 * A fresh HOME and cache, and a mirror serving the release (or the stand-in release; optionally with a
 * tampered archive).
 */
async function fixture(
  options: { standIn?: boolean; tamper?: boolean; mounts?: (www: string) => Record<string, string> } = {},
): Promise<Fixture> {
  const root = makeTempDir("repl-mcp-plugin-");
  const [home, tmp, www] = ["home", "tmp", "www"].map((name) => join(root, name)) as [string, string, string];
  for (const dir of [home, tmp, www]) mkdirSync(dir);
  const from = options.standIn ? standInDir : buildDir;
  for (const name of [CHECKSUMS_NAME, ARCHIVE]) linkOrCopy(join(from, name), join(www, name));
  if (options.tamper) {
    // A well-formed archive whose repl-mcp works (it runs the real one): only the checksum can tell.
    const trojan = `#!/bin/sh\nexec ${join(buildDir, `repl-mcp-${target}`)} "$@"\n`;
    rmSync(join(www, ARCHIVE));
    writeFileSync(join(www, ARCHIVE), await packExecutable("repl-mcp", new TextEncoder().encode(trojan)));
  }
  const server = new FakeReleaseServer(options.mounts?.(www) ?? { "/": www });
  const cache = join(home, ".cache");
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    XDG_CACHE_HOME: cache,
    XDG_CONFIG_HOME: join(home, ".config"),
    TMPDIR: tmp,
    LC_ALL: "C",
    REPL_MCP_BASE_URL: server.url,
  };
  const fx: Fixture = { root, home, cache, tmp, www, env, server };
  fixtures.push(fx);
  return fx;
}

const installedDir = (fx: Fixture) => join(fx.cache, "repl-mcp", "bin", VERSION);
const installed = (fx: Fixture) => join(installedDir(fx), "repl-mcp");

function launch(fx: Fixture, args: string[], env: Record<string, string> = {}) {
  return run([SH, LAUNCHER, ...args], { env: { ...fx.env, ...env }, cwd: fx.root });
}

function expectOneLineError(
  result: { code: number | null; stderr: string; stdout: string },
  fragment: string,
) {
  expect(result.code).toBe(1);
  expect(result.stdout).toBe("");
  const lines = result.stderr.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toStartWith(ERROR_PREFIX);
  expect(lines[0]).toContain(fragment);
}

/** Nothing installed and no temporary file of the launcher left (Claude Code keeps its own in TMPDIR). */
function expectNothingInstalled(fx: Fixture) {
  expect(listDir(installedDir(fx))).toEqual([]);
  expect(listDir(fx.tmp).filter((name) => !name.startsWith("claude-"))).toEqual([]);
}

test("the plugin, its launcher and the release are one version", () => {
  const launcherVersion = readFileSync(LAUNCHER, "utf8").match(/^VERSION="([^"]+)"$/m)?.[1];
  expect(plugin.version).toBe(VERSION);
  expect(launcherVersion).toBe(VERSION);
  // The marketplace lists this one plugin, from the folder that holds it; the version lives in plugin.json.
  expect(marketplace.plugins.map((entry) => [entry.name, entry.source])).toEqual([
    [plugin.name, "./release/plugin"],
  ]);
  expect(Object.keys(plugin.mcpServers)).toEqual(["repl-mcp"]);
  expect(plugin.mcpServers["repl-mcp"].args[0]).toBe("${CLAUDE_PLUGIN_ROOT}/scripts/launch.sh");
});

describe.skipIf(TEST_TARGET === undefined)("the launcher", () => {
  test("the first start fetches, verifies and installs the release, then execs it", async () => {
    const fx = await fixture();
    const first = await launch(fx, ["--version"]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toContain(VERSION);
    expect(fx.server.requests).toEqual([`/${CHECKSUMS_NAME}`, `/${ARCHIVE}`]);
    expect(listDir(installedDir(fx))).toEqual(["repl-mcp"]);
    expect(statSync(installed(fx)).mode & 0o777).toBe(0o755);
    expect(sha256File(installed(fx))).toBe(sha256File(join(buildDir, `repl-mcp-${target}`)));
    expect(listDir(fx.tmp)).toEqual([]);

    // Later starts use the cache and make no request at all, even with the mirror gone.
    fx.server.stop();
    const second = await launch(fx, ["--version"]);
    expect(second.code).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    expect(fx.server.requests).toHaveLength(2);
  });

  test("as an MCP server the process is the binary itself, with no shell left between", async () => {
    const fx = await fixture();
    const h = await Harness.start({
      binary: SH,
      args: [LAUNCHER, "--transport", "stdio"],
      env: { REPL_MCP_BASE_URL: fx.server.url, TMPDIR: fx.tmp },
    });
    try {
      const cached = join(h.home, ".cache", "repl-mcp", "bin", VERSION, "repl-mcp");
      expect(readlinkSync(`/proc/${h.serverPid}/exe`)).toBe(cached);
      expect(h.client.getServerVersion()?.version).toBe(VERSION);
      expect((await h.run("6 * 7")).value).toBe(42);
    } finally {
      await h.close();
    }
  });

  test("--help prewarms: it installs on first use and prints the server's help", async () => {
    const fx = await fixture();
    const help = await launch(fx, ["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--transport");
    expect(listDir(installedDir(fx))).toEqual(["repl-mcp"]);
  });

  test("without REPL_MCP_BASE_URL it downloads the GitHub release of its own version", async () => {
    const repo = readFileSync(join(PLUGIN_DIR, "scripts", "fetch-release.sh"), "utf8").match(
      /^REPO="([^"]+)"$/m,
    )?.[1];
    expect(repo).toBeDefined();
    const prefix = `/${repo}/releases/download/v${VERSION}/`;
    const fx = await fixture({ standIn: true, mounts: (www) => ({ [prefix]: www }) });
    // A copy of the scripts whose GitHub constant points at the mirror; nothing else changes.
    const scripts = join(fx.root, "scripts");
    cpSync(join(PLUGIN_DIR, "scripts"), scripts, { recursive: true });
    const shared = join(scripts, "fetch-release.sh");
    const original = readFileSync(shared, "utf8");
    const patched = original.replace(/^GITHUB="https:\/\/github\.com"$/m, `GITHUB="${fx.server.url}"`);
    expect(patched).not.toBe(original);
    writeFileSync(shared, patched);
    const { REPL_MCP_BASE_URL: _, ...env } = fx.env;
    const result = await run([SH, join(scripts, "launch.sh"), "--version"], { env, cwd: fx.root });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(fx.server.requests).toEqual([`${prefix}${CHECKSUMS_NAME}`, `${prefix}${ARCHIVE}`]);
  });

  test("a tampered asset is refused in one line, and nothing is installed", async () => {
    const fx = await fixture({ tamper: true });
    const result = await launch(fx, ["--transport", "stdio"]);
    expectOneLineError(result, `checksum mismatch for ${ARCHIVE}`);
    expectNothingInstalled(fx);
  });

  test("a failed download is one line, exit 1, and nothing is installed", async () => {
    const fx = await fixture();
    const missing = await launch(fx, ["--version"], {
      REPL_MCP_BASE_URL: `${fx.server.url}/no/such/release`,
    });
    expectOneLineError(missing, `download failed (HTTP 404): ${fx.server.url}/no/such/release/SHA256SUMS`);
    fx.server.stop();
    const refused = await launch(fx, ["--version"]);
    expectOneLineError(refused, "download failed (curl exit code 7)");
    expectNothingInstalled(fx);
  });

  test("an unsupported platform stops before any download", async () => {
    const fx = await fixture();
    const result = await launch(fx, ["--version"], { REPL_MCP_OS: "FreeBSD" });
    expectOneLineError(result, "unsupported operating system: FreeBSD");
    expect(fx.server.requests).toEqual([]);
    expectNothingInstalled(fx);
  });
});

// --- the real client -----------------------------------------------------------------------------

/** Claude Code in the fixture's HOME, with no traffic but what the test serves. */
function claude(fx: Fixture, args: string[], tag: string) {
  return run([CLAUDE, ...args], {
    cwd: join(fx.root, "project"),
    timeoutMs: 120_000,
    env: {
      ...fx.env,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
      REPL_MCP_TEST_TAG: tag,
    },
  });
}

const SERVER_LINE = /^plugin:repl-mcp:repl-mcp: .*$/m;

/** Claude Code's npm package installs its native binary in a postinstall script; without it there is none. */
const CLAUDE_VERSION = (() => {
  try {
    return Bun.spawnSync([CLAUDE, "--version"], { stdin: "ignore" }).stdout.toString().trim();
  } catch {
    return "";
  }
})();
const NO_CLAUDE = !CLAUDE_VERSION.includes("(Claude Code)");
if (NO_CLAUDE) console.warn(`skipped: the Claude Code tests (${CLAUDE} --version gave "${CLAUDE_VERSION}")`);

/** Adds the checkout as a marketplace and installs the plugin from it, as a user would. */
async function installPlugin(fx: Fixture, tag: string) {
  mkdirSync(join(fx.root, "project"));
  const added = await claude(fx, ["plugin", "marketplace", "add", ROOT], tag);
  expect(added.code).toBe(0);
  expect(added.stdout).toContain("Successfully added marketplace: repl-mcp");
  const added2 = await claude(fx, ["plugin", "install", "repl-mcp@repl-mcp"], tag);
  expect(added2.code).toBe(0);
  expect(added2.stdout).toContain("Successfully installed plugin: repl-mcp@repl-mcp");
}

async function serverLine(fx: Fixture, tag: string): Promise<string> {
  const listed = await claude(fx, ["mcp", "list"], tag);
  expect(listed.code).toBe(0);
  // `claude mcp list` starts the server, connects and closes it: nothing of it may stay behind.
  await waitFor(() => taggedPids(tag).length === 0, {
    timeoutMs: 10_000,
    what: "the plugin's server to exit",
  });
  return listed.stdout.match(SERVER_LINE)?.[0] ?? `no plugin server in: ${listed.stdout}`;
}

describe.skipIf(TEST_TARGET === undefined || NO_CLAUDE)(`Claude Code ${CLAUDE_VERSION}`, () => {
  test("validates the plugin and the marketplace", async () => {
    const fx = await fixture();
    mkdirSync(join(fx.root, "project"));
    for (const path of [PLUGIN_DIR, ROOT]) {
      const result = await claude(fx, ["plugin", "validate", path], crypto.randomUUID());
      expect(result.code).toBe(0);
      expect(result.stdout).toContain("Validation passed");
    }
  }, 240_000);

  test("installs the plugin from the checkout, connects through the launcher, and starts offline later", async () => {
    const fx = await fixture();
    const tag = crypto.randomUUID();
    await installPlugin(fx, tag);
    expect(fx.server.requests).toEqual([]); // installing downloads nothing; the first start does

    expect(await serverLine(fx, tag)).toContain("Connected");
    expect(fx.server.requests).toEqual([`/${CHECKSUMS_NAME}`, `/${ARCHIVE}`]);
    expect(listDir(installedDir(fx))).toEqual(["repl-mcp"]);

    fx.server.stop();
    expect(await serverLine(fx, tag)).toContain("Connected");
    expect(fx.server.requests).toHaveLength(2);
  }, 240_000);

  test("a tampered asset is refused: the server does not connect and nothing is installed", async () => {
    const fx = await fixture({ tamper: true });
    const tag = crypto.randomUUID();
    await installPlugin(fx, tag);
    const line = await serverLine(fx, tag);
    expect(line).not.toContain("Connected");
    expect(line).toContain("Failed");
    // Claude Code retries a server that failed to start; each try downloads and refuses again.
    expect(fx.server.requests).toContain(`/${ARCHIVE}`);
    expect(new Set(fx.server.requests)).toEqual(new Set([`/${CHECKSUMS_NAME}`, `/${ARCHIVE}`]));
    expectNothingInstalled(fx);
  }, 240_000);
});
