// A Python with numpy 2, for the tests of what only numpy 2 has (StringDType arrays). Debian 12 ships
// numpy 1.24, so a Debian 13 root with python3-numpy is made by mmdebstrap (about 300 MiB, kept between
// runs), and its python3 is started on this machine through the root's own dynamic loader and libraries:
// that python was built against a newer glibc than the host's. Such an interpreter can run a worker and
// import numpy; it cannot start copies of itself by sys.executable, which these tests never need.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { debianMirror, testCacheDir } from "./debian.ts";
import { run } from "./run.ts";

const SUITE = "trixie";
const PACKAGES = ["python3-numpy"];
const ROOT_NAME = `debian-${SUITE}-apt-${PACKAGES.join("-")}`;
const MMDEBSTRAP = Bun.which("mmdebstrap");

const rootDir = () => join(testCacheDir(), ROOT_NAME);
const done = (root: string) => join(root, ".repl-mcp-complete");

/** Why no numpy 2 interpreter can be had here, or undefined when it can. */
export function numpy2Unavailable(): string | undefined {
  if (process.platform !== "linux") return `a Debian root runs only on Linux (${process.platform})`;
  if (existsSync(done(rootDir()))) return undefined;
  if (process.getuid?.() !== 0)
    return "making the Debian 13 root with numpy 2 needs root (mmdebstrap's root mode)";
  if (MMDEBSTRAP === null) return "mmdebstrap is not installed (Debian: apt-get install mmdebstrap)";
  return undefined;
}

/** The path of a script that runs Debian 13's python3 (numpy 2) here; makes the root the first time. */
export async function numpy2Python(): Promise<string> {
  const root = rootDir();
  if (!existsSync(done(root))) await makeRoot(root);
  const libraries = readdirSync(join(root, "usr/lib")).find((name) => /-linux-gnu/.test(name));
  if (!libraries) throw new Error(`${root} has no usr/lib/<triplet>-linux-gnu`);
  const libraryDir = join(root, "usr/lib", libraries);
  const loader = readdirSync(libraryDir).find((name) => /^ld-linux.*\.so\.\d$/.test(name));
  if (!loader) throw new Error(`${libraryDir} has no dynamic loader`);
  const python = realpathSync(join(root, "usr/bin/python3"));
  const script = `${root}.python`;
  writeFileSync(
    script,
    `#!/bin/sh\nexec '${join(libraryDir, loader)}' --library-path '${libraryDir}' '${python}' "$@"\n`,
  );
  chmodSync(script, 0o755);
  return script;
}

async function makeRoot(root: string): Promise<void> {
  if (MMDEBSTRAP === null) throw new Error("mmdebstrap is not installed and no Debian 13 root is kept");
  mkdirSync(testCacheDir(), { recursive: true });
  // Made beside its final name and renamed: a run cut short never leaves a partial root to reuse.
  const partial = `${root}.${process.pid}.partial`;
  try {
    const made = await run(
      [MMDEBSTRAP, "--variant=apt", `--include=${PACKAGES.join(",")}`, SUITE, partial, debianMirror()],
      { timeoutMs: 900_000 },
    );
    if (made.code !== 0)
      throw new Error(`mmdebstrap exited ${made.code}: ${made.stderr.trim().slice(-2000)}`);
    writeFileSync(done(partial), `${SUITE} ${PACKAGES.join(" ")}\n`);
    rmSync(root, { recursive: true, force: true });
    renameSync(partial, root);
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
}
