// The npm packages behind `npx -y repl-mcp`, packed into <outdir>/npm/ so that publishing is
// `npm publish <tarball>`, platform packages first:
//
//   @repl-mcp/<os>-<cpu>  one per target: the native binary, with `os`/`cpu` (and `libc` on Linux) so
//                         npm installs only the one this machine can run, and a `bin` naming the
//                         binary itself.
//   repl-mcp              the platform packages as optionalDependencies at this exact version, no
//                         install scripts, and a `bin` that is a POSIX sh fallback.
//
// Why no install script: npm 11 holds a dependency's install scripts for review (npm 11.19 runs them
// with a warning, fails the install under strict-allow-scripts, skips them under ignore-scripts), so a
// postinstall that puts the binary in place (the way esbuild and Claude Code do) warns at best and
// otherwise breaks. Instead the binary is a bin of its own package. In a local tree (npx's
// cache, a project's node_modules) npm links the bins of every package into node_modules/.bin, in the
// order of its sorted tree walk, and keeps the first link made for a name: `node_modules/@repl-mcp/...`
// sorts before `node_modules/repl-mcp`, so `.bin/repl-mcp` is the native binary and npx runs it with no
// process of ours in between. Where only the top package's bins are linked (`npm install -g`), or if a
// future npm orders them otherwise, the main package's sh script finds the binary beside it and
// `exec`s it: still no extra Node process, and one clear line when no platform package was installed.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipDeterministic, tarArchive } from "./archive.ts";

export const NPM_DIR = "npm";
export const NPM_SCOPE = "@repl-mcp";
export const MAIN_PACKAGE = "repl-mcp";
export const REPOSITORY = "https://github.com/repl-mcp/repl-mcp";

type Target = `${"linux" | "darwin"}-${"x64" | "arm64"}`;

export const platformPackageName = (target: Target): string => `${NPM_SCOPE}/${target}`;

export interface NpmPackage {
  name: string;
  /** The tarball `npm publish` takes. */
  path: string;
}

const common = (version: string) => ({
  version,
  license: "MIT",
  homepage: REPOSITORY,
  repository: { type: "git", url: `git+${REPOSITORY}.git` },
});

function platformManifest(target: Target, version: string) {
  const [os, cpu] = target.split("-") as [string, string];
  return {
    name: platformPackageName(target),
    ...common(version),
    description: `The repl-mcp binary for ${os} ${cpu}; install repl-mcp, which picks it.`,
    os: [os],
    cpu: [cpu],
    // The Linux build is linked against glibc: musl systems (Alpine) must not pick it.
    ...(os === "linux" ? { libc: ["glibc"] } : {}),
    bin: { "repl-mcp": "repl-mcp" },
    files: ["repl-mcp"],
    preferUnplugged: true,
  };
}

function mainManifest(targets: readonly Target[], version: string) {
  return {
    name: MAIN_PACKAGE,
    ...common(version),
    description: "A persistent, trusted local Python REPL for AI agents, served over MCP",
    keywords: ["mcp", "python", "repl", "model-context-protocol"],
    bin: { "repl-mcp": "bin/repl-mcp" },
    files: ["bin/repl-mcp", "README.md"],
    optionalDependencies: Object.fromEntries(targets.map((target) => [platformPackageName(target), version])),
  };
}

/** The main package's bin where npm did not link the native binary itself (see the top of this file). */
const FALLBACK = `#!/bin/sh
# repl-mcp from npm. Where npm linked this script instead of the native binary (npm install -g links only
# this package's bins), find the binary of the platform package npm installed beside it and exec it.
set -eu
self=$0
while [ -h "$self" ]; do
  link=$(readlink "$self")
  case "$link" in
    /*) self=$link ;;
    *) self=$(dirname -- "$self")/$link ;;
  esac
done
package=$(CDPATH='' cd -- "$(dirname -- "$self")/.." && pwd)
case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) os=$(uname -s) ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) cpu=x64 ;;
  aarch64 | arm64) cpu=arm64 ;;
  *) cpu=$(uname -m) ;;
esac
for dir in "$package/node_modules/${NPM_SCOPE}/$os-$cpu" "$package/../${NPM_SCOPE}/$os-$cpu"; do
  if [ -f "$dir/repl-mcp" ]; then exec "$dir/repl-mcp" "$@"; fi
done
printf '%s\\n' "repl-mcp: error: npm installed no binary for $os-$cpu (${NPM_SCOPE}/$os-$cpu): repl-mcp runs on glibc Linux and macOS, x64 and arm64, and needs npm's optional dependencies (not --omit=optional)" >&2
exit 1
`;

const README = (version: string) => `# repl-mcp

A persistent Python REPL for AI agents, served over the Model Context Protocol. Cells run as you, with
full access to your files and network: trusted local execution, not a sandbox.

Configure an MCP client to start it with npx:

\`\`\`json
{ "mcpServers": { "repl-mcp": { "command": "npx", "args": ["-y", "repl-mcp@${version}"] } } }
\`\`\`

It needs CPython 3.10+ (\`python3\` on PATH). Documentation: ${REPOSITORY}
`;

/**
 * Writes a package tarball the way `npm pack` lays one out (every file under `package/`, gzipped tar)
 * and names it as npm would (`@scope/name` → `scope-name-<version>.tgz`). Packed by our own reproducible
 * tar and gzip rather than by running `npm pack`: the same bytes every build, no npm needed to build a
 * release, and the 110 MiB binary compressed once at zlib's level 6 instead of by npm's own pipeline
 * (8.3 → about 3 s of CPU per platform package).
 */
async function packTarball(
  into: string,
  name: string,
  version: string,
  files: { path: string; data: Uint8Array; mode: number }[],
  mtime: number,
): Promise<string> {
  const tarball = join(into, `${name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`);
  const entries = files.map((file) => ({
    name: `package/${file.path}`,
    data: file.data,
    mode: file.mode,
    mtime,
  }));
  writeFileSync(tarball, await gzipDeterministic(tarArchive(entries)));
  return tarball;
}

const text = (value: string) => new TextEncoder().encode(value);
const manifest = (value: unknown) => text(`${JSON.stringify(value, null, 2)}\n`);

/**
 * Packs one platform package per target (with the binary at `binaries.get(target)`) and the main package,
 * into `<outdir>/npm/`. Returns them in publishing order: platform packages, then the main one.
 */
export async function packNpmPackages(options: {
  version: string;
  targets: readonly Target[];
  /** The binary of each target, as a path. */
  binaries: ReadonlyMap<Target, string>;
  outdir: string;
  /** Seconds since the epoch, stored as every file's modification time. */
  mtime: number;
}): Promise<NpmPackage[]> {
  const { version, targets, mtime } = options;
  const into = join(options.outdir, NPM_DIR);
  mkdirSync(into, { recursive: true });
  const packages: NpmPackage[] = [];
  for (const target of targets) {
    const binary = options.binaries.get(target);
    if (!binary) throw new Error(`no binary for ${target} to put in ${platformPackageName(target)}`);
    const name = platformPackageName(target);
    const files = [
      { path: "package.json", data: manifest(platformManifest(target, version)), mode: 0o644 },
      { path: "repl-mcp", data: await Bun.file(binary).bytes(), mode: 0o755 },
    ];
    packages.push({ name, path: await packTarball(into, name, version, files, mtime) });
  }
  const files = [
    { path: "package.json", data: manifest(mainManifest(targets, version)), mode: 0o644 },
    { path: "README.md", data: text(README(version)), mode: 0o644 },
    { path: "bin/repl-mcp", data: text(FALLBACK), mode: 0o755 },
  ];
  packages.push({ name: MAIN_PACKAGE, path: await packTarball(into, MAIN_PACKAGE, version, files, mtime) });
  return packages;
}
