// Builds the release assets users download: one standalone binary per supported platform, each also
// packed as a deterministic .tar.gz holding a single `repl-mcp` executable, plus install.sh and a
// SHA256SUMS file covering every asset; and, in npm/, the npm packages for `npx -y repl-mcp`
// (release/npm.ts), which are published to the registry rather than attached to the release.
//
//   bun run release/release.ts                       # all platforms into dist/release/
//   bun run release/release.ts --targets linux-x64   # a subset
//   bun run release/release.ts --outdir /tmp/rel     # somewhere else
//
// Cross-compiling uses Bun's own runtime for the target platform. For any target other than the
// host, Bun fetches that runtime from the npm registry (package @oven/bun-<os>-<cpu>) the first time
// and caches it under ~/.bun/install/cache (or $BUN_INSTALL_CACHE_DIR); later builds are offline.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import pkg from "../package.json" with { type: "json" };
import { checksumFile, packExecutable, sha256Hex } from "./archive.ts";
import { compile, PRODUCT_ENTRY, recordProductProfile } from "./build.ts";
import { publishedInstaller } from "./installer.ts";
import { type NpmPackage, packNpmPackages } from "./npm.ts";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");

export const RELEASE_TARGETS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"] as const;
export type ReleaseTarget = (typeof RELEASE_TARGETS)[number];

/** Raw binary asset name, e.g. `repl-mcp-linux-x64`. */
export const binaryAssetName = (target: ReleaseTarget): string => `repl-mcp-${target}`;
/** Archive asset name, e.g. `repl-mcp-linux-x64.tar.gz`; the archive holds one file, `repl-mcp`. */
export const archiveAssetName = (target: ReleaseTarget): string => `${binaryAssetName(target)}.tar.gz`;
export const CHECKSUMS_NAME = "SHA256SUMS";
export const INSTALLER_NAME = "install.sh";
export const DEFAULT_OUTDIR = join(root, "dist", "release");

export interface ReleaseAsset {
  name: string;
  path: string;
  size: number;
  sha256: string;
}

export interface ReleaseResult {
  version: string;
  outdir: string;
  targets: ReleaseTarget[];
  /** Every published file except SHA256SUMS itself, sorted by name. */
  assets: ReleaseAsset[];
  checksumsPath: string;
  /** The npm packages in <outdir>/npm/, in publishing order (platform packages, then repl-mcp). */
  npmPackages: NpmPackage[];
  seconds: number;
}

export interface ReleaseOptions {
  targets?: readonly ReleaseTarget[];
  outdir?: string;
  /** Modification time stored in the archives; defaults to $SOURCE_DATE_EPOCH, else 0. */
  mtime?: number;
  log?: (message: string) => void;
  /**
   * Binaries already compiled by release/build.ts, packed as they are instead of compiling those targets
   * again (the tests package the dist/ build they test everywhere else). Built under the name `repl-mcp`.
   */
  prebuilt?: Partial<Record<ReleaseTarget, string>>;
}

export class ReleaseError extends Error {}
/** A bad command line or option; the CLI exits 2 for these, 1 for build failures. */
export class UsageError extends ReleaseError {}

export function parseTargets(spec: string): ReleaseTarget[] {
  const wanted = spec
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  if (wanted.length === 0) throw new UsageError("--targets needs at least one target");
  for (const target of wanted) {
    if (!(RELEASE_TARGETS as readonly string[]).includes(target)) {
      throw new UsageError(`unknown target "${target}" (known: ${RELEASE_TARGETS.join(", ")})`);
    }
  }
  // Canonical order, no duplicates.
  return RELEASE_TARGETS.filter((target) => wanted.includes(target));
}

/** The release target this machine can run natively, if any. */
export function hostTarget(): ReleaseTarget | undefined {
  const candidate = `${process.platform}-${process.arch}`;
  return (RELEASE_TARGETS as readonly string[]).includes(candidate)
    ? (candidate as ReleaseTarget)
    : undefined;
}

/** Bun names its runtime packages and cache entries with `aarch64`, not `arm64`. */
function bunRuntimeName(target: ReleaseTarget): string {
  return `bun-${target.replace("arm64", "aarch64")}`;
}

function bunCacheDir(): string {
  if (process.env.BUN_INSTALL_CACHE_DIR) return process.env.BUN_INSTALL_CACHE_DIR;
  return join(process.env.BUN_INSTALL ?? join(homedir(), ".bun"), "install", "cache");
}

/** Best effort, for the log only: whether Bun already has the target's runtime cached. */
function runtimeIsCached(target: ReleaseTarget): boolean {
  return existsSync(join(bunCacheDir(), `${bunRuntimeName(target)}-v${Bun.version}`));
}

function defaultMtime(): number {
  const epoch = process.env.SOURCE_DATE_EPOCH;
  if (epoch === undefined || epoch === "") return 0;
  if (!/^\d+$/.test(epoch)) throw new ReleaseError(`SOURCE_DATE_EPOCH must be an integer, got "${epoch}"`);
  return Number(epoch);
}

const OWN_FILE = /^(repl-mcp-(linux|darwin)-(x64|arm64)(\.tar\.gz)?|SHA256SUMS|install\.sh|npm|\.build-.*)$/;

/** Removes assets of an earlier run so SHA256SUMS and the upload match exactly this build. */
function clearOldAssets(outdir: string): void {
  for (const entry of readdirSync(outdir)) {
    if (OWN_FILE.test(entry)) rmSync(join(outdir, entry), { recursive: true, force: true });
  }
}

async function compileTarget(target: ReleaseTarget, outfile: string, bytecodeOrder: string[]): Promise<void> {
  const needsDownload = target !== hostTarget() && !runtimeIsCached(target);
  try {
    await compile({ entry: PRODUCT_ENTRY, target: `bun-${target}`, outfile, bytecodeOrder });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    // Bun has printed its own diagnostics above; add the one cause it does not spell out.
    const hint = needsDownload
      ? ` Cross-compiling needs Bun's ${target} runtime (npm package @oven/${bunRuntimeName(target)}` +
        ` ${Bun.version}), which Bun downloads from the npm registry on first use and caches in` +
        ` ${bunCacheDir()}: if Bun reported a failed download above, check network or proxy access to` +
        " the registry."
      : "";
    throw new ReleaseError(`could not compile ${target}: ${reason}.${hint}`);
  }
}

/** Runs a freshly built host binary from a neutral directory and checks it reports our version. */
async function checkVersion(binary: string, version: string): Promise<void> {
  const proc = Bun.spawn([binary, "--version"], {
    cwd: tmpdir(),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  const output = `${stdout}${stderr}`;
  if (code !== 0 || !output.includes(version)) {
    throw new ReleaseError(
      `${binary} --version exited ${code} and printed ${JSON.stringify(output.trim())}; expected ${version}`,
    );
  }
}

export async function buildRelease(options: ReleaseOptions = {}): Promise<ReleaseResult> {
  const started = performance.now();
  const log = options.log ?? ((message: string) => console.error(message));
  const targets = options.targets ? parseTargets(options.targets.join(",")) : [...RELEASE_TARGETS];
  const outdir = resolve(options.outdir ?? DEFAULT_OUTDIR);
  const mtime = options.mtime ?? defaultMtime();
  const version = pkg.version;

  mkdirSync(outdir, { recursive: true });
  clearOldAssets(outdir);
  log(`repl-mcp ${version}: building ${targets.join(", ")} into ${outdir}`);

  const assets: ReleaseAsset[] = [];
  const packing: Promise<void>[] = [];
  let npmPackages: NpmPackage[] = [];
  // One profile of a host build lays out the bytecode of every target (release/profile.ts).
  const profileDir = mkdtempSync(join(tmpdir(), "repl-mcp-release-profile-"));
  try {
    const prebuilt = options.prebuilt ?? {};
    const compiling = targets.some((target) => prebuilt[target] === undefined);
    if (compiling) log("recording the bytecode profile");
    const bytecodeOrder = compiling ? await recordProductProfile(profileDir) : [];
    for (const target of targets) {
      const binaryPath = join(outdir, binaryAssetName(target));
      const given = prebuilt[target];
      if (given === undefined) {
        const runtime = target === hostTarget() ? "host" : runtimeIsCached(target) ? "cached" : "to download";
        log(`compiling ${target} (Bun runtime: ${runtime})`);
        // Compile under the in-archive name: Bun embeds the output file name in the binary, so this keeps
        // the raw asset and the archive member byte-identical and the build reproducible.
        const workdir = join(outdir, `.build-${target}`);
        rmSync(workdir, { recursive: true, force: true });
        const built = join(workdir, "repl-mcp");
        await compileTarget(target, built, bytecodeOrder);
        renameSync(built, binaryPath);
        rmSync(workdir, { recursive: true, force: true });
      } else {
        log(`packing the prebuilt ${target} binary ${given}`);
        copyFileSync(given, binaryPath);
        chmodSync(binaryPath, 0o755);
      }

      const data = await Bun.file(binaryPath).bytes();
      if (data.length === 0) throw new ReleaseError(`compiling ${target} produced an empty file`);
      assets.push({
        name: binaryAssetName(target),
        path: binaryPath,
        size: data.length,
        sha256: sha256Hex(data),
      });
      if (target === hostTarget()) await checkVersion(binaryPath, version);

      // Compression runs on the thread pool while the next target compiles.
      const archiveName = archiveAssetName(target);
      const archivePath = join(outdir, archiveName);
      packing.push(
        packExecutable("repl-mcp", data, mtime).then((archive) => {
          writeFileSync(archivePath, archive);
          assets.push({
            name: archiveName,
            path: archivePath,
            size: archive.length,
            sha256: sha256Hex(archive),
          });
          log(`packed ${archiveName}`);
        }),
      );
    }
    await Promise.all(packing);
    log("packing the npm packages");
    const binaries = new Map(targets.map((target) => [target, join(outdir, binaryAssetName(target))]));
    npmPackages = await packNpmPackages({ version, targets, binaries, outdir, mtime });
  } catch (error) {
    // Leave no half-built release behind that could be mistaken for a complete one.
    await Promise.allSettled(packing);
    clearOldAssets(outdir);
    throw error;
  } finally {
    rmSync(profileDir, { recursive: true, force: true });
  }

  const installer = join(outdir, INSTALLER_NAME);
  writeFileSync(installer, publishedInstaller(), { mode: 0o644 });
  const installerData = await Bun.file(installer).bytes();
  assets.push({
    name: INSTALLER_NAME,
    path: installer,
    size: installerData.length,
    sha256: sha256Hex(installerData),
  });

  assets.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const checksumsPath = join(outdir, CHECKSUMS_NAME);
  writeFileSync(checksumsPath, checksumFile(assets));
  const seconds = (performance.now() - started) / 1000;
  return { version, outdir, targets, assets, checksumsPath, npmPackages, seconds };
}

const USAGE = `Usage: bun run release/release.ts [--targets LIST] [--outdir DIR]

Builds the release assets for repl-mcp ${pkg.version}.

  --targets LIST  comma-separated subset of ${RELEASE_TARGETS.join(",")} (default: all)
  --outdir DIR    output directory (default: dist/release)
  -h, --help      show this help

Earlier assets in the output directory are replaced; SOURCE_DATE_EPOCH sets the archive mtime.`;

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

if (import.meta.main) {
  try {
    const { values } = parseArgs({
      options: {
        targets: { type: "string" },
        outdir: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
    if (values.help) {
      console.log(USAGE);
      process.exit(0);
    }
    const result = await buildRelease({
      targets: values.targets === undefined ? undefined : parseTargets(values.targets),
      outdir: values.outdir,
    });
    for (const asset of result.assets)
      console.log(`${asset.name.padEnd(32)} ${mib(asset.size).padStart(10)}`);
    for (const npm of result.npmPackages) console.log(`${npm.name.padEnd(32)} ${npm.path}`);
    console.log(`${CHECKSUMS_NAME} written to ${result.checksumsPath} (${result.seconds.toFixed(1)} s)`);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    console.error(`release: error: ${message}`);
    const usage =
      error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
    process.exit(usage ? 2 : 1);
  }
}
