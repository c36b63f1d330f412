// The install path users follow: the release build for this platform, served from a fake GitHub
// release on 127.0.0.1, installed by release/install.sh. Every failure mode must refuse cleanly,
// leave an existing installation untouched and leave no temporary files behind.
//
// Moving the real 110 MiB binary through an install (download, checksum, unpack, copy, run, hash again)
// costs seconds of CPU, so only these tests use the real release: the release build's assets and its
// binary run from outside the checkout, one install per shell, and the MCP session of the binary itself.
// The installer's mechanics (the checkout's install.sh, --dir and the environment, GitHub URLs, refusals,
// atomic re-install, interruptions, wget and shasum, uname names, failed downloads) run against a stand-in
// release: the same release code's assets around a 1 MiB script that answers --version as the binary does
// (sharedTestRelease in support.ts). Packing is shown deterministic on the stand-in too.
import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  closeSync,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { packExecutable, sha256Hex } from "../../release/archive.ts";
import { publishedInstaller, SHARED_FETCH_LINE, SHARED_FETCH_SOURCE } from "../../release/installer.ts";
import {
  archiveAssetName,
  binaryAssetName,
  CHECKSUMS_NAME,
  hostTarget,
  INSTALLER_NAME,
  RELEASE_TARGETS,
  type ReleaseResult,
  type ReleaseTarget,
} from "../../release/release.ts";
import { Harness } from "../support/harness.ts";
import {
  CHECKOUT_INSTALL_SH,
  FakeReleaseServer,
  FIRST_CHUNK_BYTES,
  isInside,
  linkOrCopy,
  listDir,
  makeTempDir,
  ROOT,
  removeTree,
  run,
  sha256File,
  sharedTestRelease,
  stageBinaryOutsideCheckout,
  TEST_TARGET,
  VERSION,
} from "./support.ts";

const target = TEST_TARGET ?? "linux-x64";
const ARCHIVE = archiveAssetName(target);
const BINARY = binaryAssetName(target);
const ERROR_PREFIX = "repl-mcp install: error: ";

/** An install of the real release moves a ~100 MiB binary around several times: allow for slow disks. */
function slowTest(name: string, fn: () => Promise<void>) {
  test(name, fn, 180_000);
}

let buildDir = "";
/** The release of the real binary. */
let release: ReleaseResult;
/** The same release code's assets around a stand-in binary, for the installer's mechanics. */
let standIn: ReleaseResult;
/** The SHA-256 of each release's binary. */
const binarySha = new Map<ReleaseResult, string>();

beforeAll(async () => {
  release = await sharedTestRelease(target);
  buildDir = release.outdir;
  standIn = await sharedTestRelease(target, { standIn: true });
  for (const from of [release, standIn]) binarySha.set(from, sha256File(join(from.outdir, BINARY)));
}, 240_000);

/** The install.sh users download: the release build's, with the shared code written into it. */
function installer(): string {
  return join(buildDir, INSTALLER_NAME);
}

// --- per-test fixture ------------------------------------------------------------------------------

interface Fixture {
  root: string;
  home: string;
  /** TMPDIR for the script: must be empty again afterwards. */
  tmp: string;
  /** The fake release directory. */
  www: string;
  env: Record<string, string>;
  servers: FakeReleaseServer[];
}

const fixtures: Fixture[] = [];

afterEach(() => {
  for (const fx of fixtures.splice(0)) {
    for (const server of fx.servers) server.stop();
    removeTree(fx.root);
  }
});

function fixture(): Fixture {
  const root = makeTempDir();
  const fx: Fixture = {
    root,
    home: join(root, "home"),
    tmp: join(root, "tmp"),
    www: join(root, "www"),
    env: {},
    servers: [],
  };
  for (const dir of [fx.home, fx.tmp, fx.www]) mkdirSync(dir);
  // A minimal, explicit environment: nothing of the caller's REPL_MCP_* settings leaks in.
  fx.env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: fx.home, TMPDIR: fx.tmp, LC_ALL: "C" };
  fixtures.push(fx);
  return fx;
}

/** Puts a release's assets into the fixture's www dir, optionally without or with replaced files. */
function publish(
  fx: Fixture,
  from: ReleaseResult,
  options: { omit?: string[]; replace?: Record<string, Uint8Array | string> } = {},
) {
  for (const name of [ARCHIVE, BINARY, CHECKSUMS_NAME, INSTALLER_NAME]) {
    if (options.omit?.includes(name)) continue;
    const replacement = options.replace?.[name];
    if (replacement === undefined) linkOrCopy(join(from.outdir, name), join(fx.www, name));
    else writeFileSync(join(fx.www, name), replacement); // a new file: never write through a link
  }
}

function serve(fx: Fixture, mounts: Record<string, string> = { "/": fx.www }): FakeReleaseServer {
  const server = new FakeReleaseServer(mounts);
  fx.servers.push(server);
  return server;
}

const SHELLS = ["sh", "dash", "bash"].filter((shell) => Bun.which(shell) !== null);

function install(
  fx: Fixture,
  args: string[],
  options: { shell?: string; env?: Record<string, string>; cwd?: string; script?: string } = {},
) {
  const shell = Bun.which(options.shell ?? "sh") ?? "/bin/sh";
  return run([shell, options.script ?? installer(), ...args], {
    env: { ...fx.env, ...options.env },
    cwd: options.cwd ?? fx.root,
  });
}

function defaultBin(fx: Fixture): string {
  return join(fx.home, ".local", "bin");
}

/** The script failed with exactly one `repl-mcp install: error:` line containing `fragment`. */
function expectOneLineError(result: { code: number | null; stderr: string }, fragment: string) {
  expect(result.code).not.toBe(0);
  expect(result.code).not.toBeNull();
  const lines = result.stderr.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toStartWith(ERROR_PREFIX);
  expect(lines[0]).toContain(fragment);
}

function expectNoTempFiles(fx: Fixture, installDir: string, expected: string[]) {
  expect(listDir(fx.tmp)).toEqual([]);
  expect(listDir(installDir)).toEqual(expected);
}

/** A stand-in for an older installed version, to check it is left alone (or replaced whole). */
function preinstallOld(dir: string): { path: string; content: string; ino: number } {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, "repl-mcp");
  const content = "#!/bin/sh\necho 'repl-mcp 0.0.1-old'\n";
  writeFileSync(path, content);
  chmodSync(path, 0o755);
  return { path, content, ino: statSync(path).ino };
}

function expectUntouched(old: { path: string; content: string; ino: number }) {
  expect(readFileSync(old.path, "utf8")).toBe(old.content);
  expect(statSync(old.path).ino).toBe(old.ino);
}

/** `path` is the binary of release `from`, installed executable, and it answers --version. */
async function expectWorkingBinary(path: string, from: ReleaseResult) {
  const stat = statSync(path);
  expect(stat.isFile()).toBe(true);
  expect(stat.mode & 0o777).toBe(0o755);
  expect(sha256File(path)).toBe(binarySha.get(from) as string);
  const version = await run([path, "--version"], { cwd: join(path, "..") });
  expect(version.code).toBe(0);
  expect(`${version.stdout}${version.stderr}`).toContain(VERSION);
}

/** A text field of the first ustar header in `tar`, up to its NUL. */
function tarField(tar: Uint8Array, offset: number, length: number): string {
  return new TextDecoder().decode(tar.subarray(offset, offset + length)).replace(/\0.*$/s, "");
}

/** The first balanced {...} block after `label` in `text`. */
function jsonBlockAfter(text: string, label: string): unknown {
  const start = text.indexOf("{", text.indexOf(label));
  let depth = 0;
  for (let i = start; i >= 0 && i < text.length; i++) {
    if (text[i] === "{") depth++;
    if (text[i] === "}" && --depth === 0) return JSON.parse(text.slice(start, i + 1));
  }
  throw new Error(`no JSON block after ${label}`);
}

/** A directory of symlinks to the given host tools, to run the script with a restricted PATH. */
function toolDir(fx: Fixture, name: string, tools: string[]): string {
  const dir = join(fx.root, name);
  mkdirSync(dir);
  for (const tool of tools) {
    const path = Bun.which(tool);
    if (path === null) throw new Error(`${tool} is not installed on this machine`);
    symlinkSync(path, join(dir, tool));
  }
  return dir;
}

const BASE_TOOLS = [
  "uname",
  "mktemp",
  "rm",
  "mkdir",
  "cp",
  "mv",
  "chmod",
  "tar",
  "gzip",
  "awk",
  "sed",
  "cat",
];

// --- the release assets ----------------------------------------------------------------------------

describe.skipIf(TEST_TARGET === undefined)(`release build for ${target}`, () => {
  slowTest("writes the binary, a single-file archive, install.sh and matching SHA256SUMS", async () => {
    expect(release.version).toBe(VERSION);
    expect(release.assets.map((asset) => asset.name)).toEqual([INSTALLER_NAME, BINARY, ARCHIVE]);
    expect(listDir(buildDir)).toEqual([CHECKSUMS_NAME, INSTALLER_NAME, BINARY, ARCHIVE, "npm"].sort());
    // The npm packages (tests/release/npm.test.ts publishes them) are not release assets.
    expect(listDir(join(buildDir, "npm"))).toEqual([
      `repl-mcp-${VERSION}.tgz`,
      `repl-mcp-${target}-${VERSION}.tgz`,
    ]);
    expect(statSync(join(buildDir, BINARY)).mode & 0o777).toBe(0o755);

    const lines = readFileSync(join(buildDir, CHECKSUMS_NAME), "utf8").trimEnd().split("\n");
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      const match = line.match(/^([0-9a-f]{64}) {2}(\S+)$/);
      expect(match).not.toBeNull();
      const [, sum, name] = match as RegExpMatchArray;
      expect(sha256File(join(buildDir, name as string))).toBe(sum as string);
    }
    if (Bun.which("sha256sum")) {
      const check = await run(["sha256sum", "-c", CHECKSUMS_NAME], { cwd: buildDir });
      expect(check.code).toBe(0);
    }

    // The archive holds exactly one entry, repl-mcp, 0755, owned by 0/0, with a fixed mtime.
    const archive = readFileSync(join(buildDir, ARCHIVE));
    expect([...archive.subarray(4, 8)]).toEqual([0, 0, 0, 0]); // gzip MTIME
    const tar = Bun.gunzipSync(archive);
    const field = (offset: number, length: number) => tarField(tar, offset, length);
    expect(field(0, 100)).toBe("repl-mcp");
    expect(Number.parseInt(field(100, 8), 8)).toBe(0o755);
    expect(Number.parseInt(field(108, 8), 8)).toBe(0);
    expect(Number.parseInt(field(116, 8), 8)).toBe(0);
    expect(Number.parseInt(field(136, 12), 8)).toBe(Number(process.env.SOURCE_DATE_EPOCH ?? 0));
    const size = Number.parseInt(field(124, 12), 8);
    expect(size).toBe(statSync(join(buildDir, BINARY)).size);
    const next = 512 + Math.ceil(size / 512) * 512;
    expect(tar.subarray(next, next + 1024).every((byte) => byte === 0)).toBe(true);
    expect(sha256Hex(tar.subarray(512, 512 + size))).toBe(binarySha.get(release) as string);

    // Packing is deterministic: the same binary always gives the same archive. Shown on the stand-in
    // release, made by the same code: packing the real binary again would cost seconds of CPU.
    const standInArchive = readFileSync(join(standIn.outdir, ARCHIVE));
    const repacked = await packExecutable(
      "repl-mcp",
      readFileSync(join(standIn.outdir, BINARY)),
      Number.parseInt(tarField(Bun.gunzipSync(standInArchive), 136, 12), 8),
    );
    expect(sha256Hex(repacked)).toBe(sha256Hex(standInArchive));
  });

  slowTest("the published install.sh carries the shared code instead of sourcing it", () => {
    const published = readFileSync(installer(), "utf8");
    expect(published).toBe(publishedInstaller());
    expect(published.split("\n")).not.toContain(SHARED_FETCH_LINE);
    expect(readFileSync(CHECKOUT_INSTALL_SH, "utf8").split("\n")).toContain(SHARED_FETCH_LINE);
    expect(published).toContain(readFileSync(SHARED_FETCH_SOURCE, "utf8").trimEnd());
    // Every install test below runs this file from a directory without plugin/ beside it.
    expect(listDir(buildDir)).not.toContain("plugin");
    return Promise.resolve();
  });

  slowTest("the binary answers --version from a directory outside the checkout", async () => {
    const fx = fixture();
    const staged = stageBinaryOutsideCheckout(join(buildDir, BINARY), fx.root);
    expect(isInside(staged.binary, ROOT)).toBe(false);
    expect(isInside(staged.cwd, ROOT)).toBe(false);
    const result = await run([staged.binary, "--version"], { cwd: staged.cwd, env: fx.env });
    expect(result.code).toBe(0);
    expect(`${result.stdout}${result.stderr}`).toContain(VERSION);
  });
});

slowTest("release.ts stops with a clear message when a target's Bun runtime cannot be fetched", async () => {
  const fx = fixture();
  const other = RELEASE_TARGETS.find((candidate) => candidate !== hostTarget()) as ReleaseTarget;
  const outdir = join(fx.root, "out");
  // An empty Bun cache and an unreachable proxy: the runtime download must fail.
  const result = await run(
    [process.execPath, "run", join(ROOT, "release", "release.ts"), "--targets", other, "--outdir", outdir],
    {
      cwd: ROOT,
      env: {
        ...fx.env,
        BUN_INSTALL_CACHE_DIR: join(fx.root, "bun-cache"),
        HTTPS_PROXY: "http://127.0.0.1:9",
        https_proxy: "http://127.0.0.1:9",
      },
    },
  );
  expect(result.code).toBe(1);
  const message = result.stderr.trimEnd().split("\n").at(-1) ?? "";
  expect(message).toStartWith(`release: error: could not compile ${other}:`);
  expect(message).toContain("npm registry");
  expect(listDir(outdir)).toEqual([]); // no half-built release left behind
});

// --- install.sh against a local server ---------------------------------------------------------------

describe.skipIf(TEST_TARGET === undefined)("install.sh", () => {
  for (const shell of SHELLS) {
    slowTest(`installs a working binary into ~/.local/bin (${shell})`, async () => {
      const fx = fixture();
      publish(fx, release);
      const server = serve(fx);
      const result = await install(fx, ["--base-url", `${server.url}/`], { shell });
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);

      const bin = defaultBin(fx);
      const installed = join(bin, "repl-mcp");
      await expectWorkingBinary(installed, release);
      expectNoTempFiles(fx, bin, ["repl-mcp"]);
      expect(server.requests).toEqual([`/${CHECKSUMS_NAME}`, `/${ARCHIVE}`]);

      // The report: installed version, client snippets with the absolute path, and the PATH hint.
      expect(result.stdout).toContain(`Installed ${installed}\n`);
      expect(result.stdout).toContain(VERSION);
      expect(result.stdout).toContain(`claude mcp add repl-mcp -- ${installed}\n`);
      expect(result.stdout).toContain(`[mcp_servers.repl-mcp]\n    command = "${installed}"\n`);
      expect(jsonBlockAfter(result.stdout, "mcpServers JSON")).toEqual({
        mcpServers: { "repl-mcp": { command: installed, args: ["--transport", "stdio"] } },
      });
      expect(result.stdout).toContain(`${bin} is not on your PATH`);
      expect(result.stdout).toContain(`export PATH="${bin}:$PATH"`);
    });
  }

  slowTest(
    "the checkout's install.sh, which sources the plugin's fetch-release.sh, installs alike",
    async () => {
      const fx = fixture();
      publish(fx, standIn);
      const server = serve(fx);
      const result = await install(fx, ["--base-url", server.url], { script: CHECKOUT_INSTALL_SH });
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      await expectWorkingBinary(join(defaultBin(fx), "repl-mcp"), standIn);
      expect(server.requests).toEqual([`/${CHECKSUMS_NAME}`, `/${ARCHIVE}`]);
      expectNoTempFiles(fx, defaultBin(fx), ["repl-mcp"]);
    },
  );

  slowTest(
    "--dir and REPL_MCP_INSTALL_DIR choose the directory; a relative one is made absolute",
    async () => {
      const fx = fixture();
      publish(fx, standIn);
      const server = serve(fx);

      const relative = await install(fx, ["--dir", "tools/bin"], { env: { REPL_MCP_BASE_URL: server.url } });
      expect(relative.code).toBe(0);
      const relBin = join(fx.root, "tools", "bin");
      await expectWorkingBinary(join(relBin, "repl-mcp"), standIn);
      expect(relative.stdout).toContain(`claude mcp add repl-mcp -- ${join(relBin, "repl-mcp")}\n`);

      const envBin = join(fx.root, "env bin"); // a space: the Claude command line must quote it
      const viaEnv = await install(fx, [], {
        env: {
          REPL_MCP_BASE_URL: server.url,
          REPL_MCP_INSTALL_DIR: envBin,
          PATH: `${envBin}:${fx.env.PATH}`,
        },
      });
      expect(viaEnv.code).toBe(0);
      await expectWorkingBinary(join(envBin, "repl-mcp"), standIn);
      expect(viaEnv.stdout).toContain(`claude mcp add repl-mcp -- '${join(envBin, "repl-mcp")}'\n`);
      expect(viaEnv.stdout).not.toContain("not on your PATH");
      expect(listDir(defaultBin(fx))).toEqual([]);
      expectNoTempFiles(fx, envBin, ["repl-mcp"]);
    },
  );

  slowTest(
    "downloads from GitHub's latest release, or from the tag given by --version / REPL_MCP_VERSION",
    async () => {
      const fx = fixture();
      publish(fx, standIn);
      const original = readFileSync(installer(), "utf8");
      const repo = original.match(/^REPO="([^"]+)"$/m)?.[1];
      expect(repo).toBeDefined();
      const latest = `/${repo}/releases/latest/download/`;
      const tagged = `/${repo}/releases/download/v${VERSION}/`;
      const server = serve(fx, { [latest]: fx.www, [tagged]: fx.www });
      // Point the script's GitHub constant at the local server; everything after it is unchanged.
      const patched = original.replace(/^GITHUB="https:\/\/github\.com"$/m, `GITHUB="${server.url}"`);
      expect(patched).not.toBe(original);
      const script = join(fx.root, "install.sh");
      writeFileSync(script, patched);

      const runs: Array<[string[], Record<string, string>, string]> = [
        [[], {}, latest],
        [["--version", VERSION], {}, tagged],
        [[], { REPL_MCP_VERSION: `v${VERSION}` }, tagged],
      ];
      for (const [args, env, prefix] of runs) {
        server.requests.length = 0;
        const result = await install(fx, args, { script, env });
        expect(result.stderr).toBe("");
        expect(result.code).toBe(0);
        expect(server.requests).toEqual([`${prefix}${CHECKSUMS_NAME}`, `${prefix}${ARCHIVE}`]);
      }
      await expectWorkingBinary(join(defaultBin(fx), "repl-mcp"), standIn);

      const bad = await install(fx, ["--version", "1.0;rm"], { script });
      expectOneLineError(bad, "invalid version");
    },
  );

  slowTest("a tampered archive is refused before anything is installed", async () => {
    const fx = fixture();
    const tampered = new Uint8Array(readFileSync(join(standIn.outdir, ARCHIVE)));
    const middle = Math.floor(tampered.length / 2);
    tampered[middle] = (tampered[middle] as number) ^ 0xff;
    publish(fx, standIn, { replace: { [ARCHIVE]: tampered } });
    const server = serve(fx);

    const fresh = await install(fx, ["--base-url", server.url]);
    expectOneLineError(fresh, `checksum mismatch for ${ARCHIVE}`);
    expect(fresh.stderr).toContain(sha256Hex(tampered));
    expectNoTempFiles(fx, defaultBin(fx), []);

    const old = preinstallOld(defaultBin(fx));
    const over = await install(fx, ["--base-url", server.url]);
    expectOneLineError(over, "checksum mismatch");
    expectUntouched(old);
    expectNoTempFiles(fx, defaultBin(fx), ["repl-mcp"]);
  });

  slowTest("an archive without a checksum line is refused", async () => {
    const fx = fixture();
    const sums = readFileSync(join(standIn.outdir, CHECKSUMS_NAME), "utf8")
      .split("\n")
      .filter((line) => !line.endsWith(`  ${ARCHIVE}`))
      .join("\n");
    publish(fx, standIn, { replace: { [CHECKSUMS_NAME]: sums } });
    const server = serve(fx);
    const old = preinstallOld(defaultBin(fx));
    const result = await install(fx, ["--base-url", server.url]);
    expectOneLineError(result, `SHA256SUMS has no checksum for ${ARCHIVE}`);
    expect(server.requests).toEqual([`/${CHECKSUMS_NAME}`]);
    expectUntouched(old);
    expectNoTempFiles(fx, defaultBin(fx), ["repl-mcp"]);
  });

  slowTest("a verified archive whose binary does not run is not installed", async () => {
    const fx = fixture();
    const broken = await packExecutable("repl-mcp", new TextEncoder().encode("#!/bin/sh\nexit 3\n"));
    publish(fx, standIn, {
      replace: { [ARCHIVE]: broken, [CHECKSUMS_NAME]: `${sha256Hex(broken)}  ${ARCHIVE}\n` },
    });
    const server = serve(fx);
    const old = preinstallOld(defaultBin(fx));
    const result = await install(fx, ["--base-url", server.url]);
    expectOneLineError(result, "does not run here");
    expectUntouched(old);
    expectNoTempFiles(fx, defaultBin(fx), ["repl-mcp"]);
  });

  slowTest("unsupported operating systems and architectures stop before downloading", async () => {
    const fx = fixture();
    publish(fx, standIn);
    const server = serve(fx);
    const old = preinstallOld(defaultBin(fx));
    const cases: Array<[Record<string, string>, string]> = [
      [{ REPL_MCP_OS: "FreeBSD" }, "unsupported operating system: FreeBSD"],
      [{ REPL_MCP_OS: "MINGW64_NT-10.0" }, "unsupported operating system: MINGW64_NT-10.0"],
      [{ REPL_MCP_ARCH: "riscv64" }, "unsupported architecture: riscv64"],
      [{ REPL_MCP_OS: "Darwin", REPL_MCP_ARCH: "ppc" }, "unsupported architecture: ppc"],
    ];
    for (const [env, message] of cases) {
      const result = await install(fx, ["--base-url", server.url], { env });
      expectOneLineError(result, message);
    }
    expect(server.requests).toEqual([]);
    expectUntouched(old);
    expectNoTempFiles(fx, defaultBin(fx), ["repl-mcp"]);
  });

  slowTest("maps uname names to assets, and prefers arm64 under Rosetta 2", async () => {
    const fx = fixture();
    // An empty SHA256SUMS: every run stops at the checksum lookup, naming the asset it wanted.
    publish(fx, standIn, { replace: { [CHECKSUMS_NAME]: "" } });
    const server = serve(fx);
    const fakeBin = join(fx.root, "fake-bin");
    mkdirSync(fakeBin);
    writeFileSync(
      join(fakeBin, "sysctl"),
      '#!/bin/sh\nif [ "$1" = -n ] && [ "$2" = sysctl.proc_translated ]; then echo 1; else exit 1; fi\n',
    );
    chmodSync(join(fakeBin, "sysctl"), 0o755);
    const rosetta = { PATH: `${fakeBin}:${fx.env.PATH}` };

    const cases: Array<[string, string, Record<string, string>, string]> = [
      ["Linux", "x86_64", {}, "linux-x64"],
      ["Linux", "amd64", {}, "linux-x64"],
      ["Linux", "aarch64", {}, "linux-arm64"],
      ["Linux", "arm64", {}, "linux-arm64"],
      ["Darwin", "arm64", {}, "darwin-arm64"],
      ["Darwin", "x86_64", { PATH: fx.env.PATH as string }, "darwin-x64"],
      ["Darwin", "x86_64", rosetta, "darwin-arm64"],
      ["Linux", "x86_64", rosetta, "linux-x64"], // Rosetta only matters on macOS
    ];
    for (const [os, arch, env, expected] of cases) {
      const result = await install(fx, ["--base-url", server.url], {
        env: { REPL_MCP_OS: os, REPL_MCP_ARCH: arch, ...env },
      });
      expectOneLineError(result, `no checksum for repl-mcp-${expected}.tar.gz`);
      expect(result.stdout.includes("Rosetta 2 detected")).toBe(os === "Darwin" && env === rosetta);
    }
    expectNoTempFiles(fx, defaultBin(fx), []);
  });

  slowTest("a failed download stops with the HTTP status or the connection error", async () => {
    const fx = fixture();
    publish(fx, standIn, { omit: [ARCHIVE] });
    const server = serve(fx);
    const old = preinstallOld(defaultBin(fx));

    const missingArchive = await install(fx, ["--base-url", server.url]);
    expectOneLineError(missingArchive, `download failed (HTTP 404): ${server.url}/${ARCHIVE}`);

    const missingSums = await install(fx, ["--base-url", `${server.url}/no/such/release`]);
    expectOneLineError(missingSums, `download failed (HTTP 404): ${server.url}/no/such/release/SHA256SUMS`);

    const closed = new FakeReleaseServer({});
    const closedUrl = closed.url;
    closed.stop();
    const refused = await install(fx, ["--base-url", closedUrl]);
    expectOneLineError(refused, `download failed (curl exit code 7): ${closedUrl}/SHA256SUMS`);

    expectUntouched(old);
    expectNoTempFiles(fx, defaultBin(fx), ["repl-mcp"]);
  });

  slowTest("re-installing replaces the binary atomically", async () => {
    const fx = fixture();
    publish(fx, standIn);
    const server = serve(fx);
    const bin = defaultBin(fx);
    const old = preinstallOld(bin);
    // Keep the old file open: if the installer wrote into it instead of replacing it, we would see.
    const fd = openSync(old.path, "r");
    try {
      const first = await install(fx, ["--base-url", server.url]);
      expect(first.code).toBe(0);
      const buffer = Buffer.alloc(4096);
      const n = readSync(fd, buffer, 0, buffer.length, 0);
      expect(buffer.subarray(0, n).toString()).toBe(old.content);
      expect(fstatSync(fd).nlink).toBe(0); // the old inode was unlinked by the rename, not rewritten
    } finally {
      closeSync(fd);
    }
    const afterFirst = statSync(join(bin, "repl-mcp"));
    expect(afterFirst.ino).not.toBe(old.ino);
    await expectWorkingBinary(join(bin, "repl-mcp"), standIn);

    const second = await install(fx, ["--base-url", server.url]);
    expect(second.code).toBe(0);
    expect(statSync(join(bin, "repl-mcp")).ino).not.toBe(afterFirst.ino);
    await expectWorkingBinary(join(bin, "repl-mcp"), standIn);
    expectNoTempFiles(fx, bin, ["repl-mcp"]);
  });

  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const) {
    slowTest(`an interrupted download (${signal}) cleans up and installs nothing`, async () => {
      const fx = fixture();
      publish(fx, standIn);
      // The server stalls after the first chunk: the archive must be larger, or the download would end.
      expect(statSync(join(fx.www, ARCHIVE)).size).toBeGreaterThan(FIRST_CHUNK_BYTES);
      const server = serve(fx);
      const hold = server.holdAfterFirstChunk(`/${ARCHIVE}`);
      let pid = 0;
      // Its own process group, like a terminal's foreground job: the signal reaches sh and curl.
      const running = run([Bun.which("sh") ?? "/bin/sh", installer(), "--base-url", server.url], {
        env: fx.env,
        cwd: fx.root,
        detached: true,
        onSpawn: (proc) => {
          pid = proc.pid;
        },
      });
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        hold.started,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("the download never started")), 20_000);
        }),
      ]);
      clearTimeout(timer);
      expect(listDir(fx.tmp)).toHaveLength(1); // the script's temp dir exists mid-download
      process.kill(-pid, signal);
      const result = await running;
      hold.release();
      expect(result.code).toBe(code);
      expectNoTempFiles(fx, defaultBin(fx), []);
    });
  }

  slowTest("works with wget and shasum when curl and sha256sum are missing", async () => {
    if (!Bun.which("wget") || !Bun.which("shasum")) {
      console.warn("skipped: wget or shasum is not installed");
      return;
    }
    const fx = fixture();
    publish(fx, standIn);
    const server = serve(fx);
    const path = toolDir(fx, "tools", [...BASE_TOOLS, "wget", "shasum"]);
    const result = await install(fx, ["--base-url", server.url], { env: { PATH: path } });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    await expectWorkingBinary(join(defaultBin(fx), "repl-mcp"), standIn);
    expect(server.requests).toEqual([`/${CHECKSUMS_NAME}`, `/${ARCHIVE}`]);

    const failing = await install(fx, ["--base-url", `${server.url}/missing`], { env: { PATH: path } });
    expectOneLineError(failing, `download failed (wget could not fetch it`);
    expectNoTempFiles(fx, defaultBin(fx), ["repl-mcp"]);
  });

  slowTest("without curl or wget it says so", async () => {
    const fx = fixture();
    publish(fx, standIn);
    const server = serve(fx);
    const path = toolDir(fx, "tools", [...BASE_TOOLS, "sha256sum"]);
    const result = await install(fx, ["--base-url", server.url], { env: { PATH: path } });
    expectOneLineError(result, "neither curl nor wget is installed");
    expect(server.requests).toEqual([]);
    expectNoTempFiles(fx, defaultBin(fx), []);
  });

  slowTest("--help prints usage; a bad argument is a usage error", async () => {
    const fx = fixture();
    const help = await install(fx, ["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: install.sh");
    for (const word of ["--version", "--dir", "--base-url", "REPL_MCP_OS", "REPL_MCP_ARCH"]) {
      expect(help.stdout).toContain(word);
    }
    const unknown = await install(fx, ["--frobnicate"]);
    expect(unknown.code).toBe(2);
    expectOneLineError(unknown, "unknown argument: --frobnicate");
    const missing = await install(fx, ["--dir"]);
    expect(missing.code).toBe(2);
    expectOneLineError(missing, "--dir needs a value");
    expectNoTempFiles(fx, defaultBin(fx), []);
  });
});

describe("the release binary itself", () => {
  slowTest("run from outside the checkout it initializes, lists its tools and runs a cell", async () => {
    const dir = makeTempDir("repl-mcp-release-smoke-");
    try {
      const staged = stageBinaryOutsideCheckout(join(buildDir, BINARY), dir);
      expect(isInside(staged.binary, ROOT)).toBe(false);
      const h = await Harness.start({ binary: staged.binary, cwd: staged.cwd });
      try {
        expect(h.client.getServerVersion()?.version).toBe(VERSION);
        const listed = await h.client.listTools();
        expect(listed.tools.map((tool) => tool.name)).toContain("execute_python");
        const cell = await h.run("import os\n[6 * 7, os.getcwd()]");
        expect(cell.value).toEqual([42, staged.cwd]);
      } finally {
        await h.close();
      }
    } finally {
      removeTree(dir);
    }
  });
});
