// The last build of the product on the MCP SDK 1.x, benchmarked beside the current one so every figure
// compares old and new in the same run (issue 19: no figure may get more than 10% worse).
//
// It is built from its own commit, once per machine, and kept in a cache:
//   1. `git archive` of the commit into a fresh directory under ~/.cache/repl-mcp-bench/<commit>/,
//   2. `npm ci --omit=dev --ignore-scripts` there (the runtime dependencies are all a build needs; the
//      compiler is this benchmark's own Bun, which is the version that commit pins),
//   3. `bun run release/build.ts` there: the same profiled build as the product's own,
//   4. the binary moved to ~/.cache/repl-mcp-bench/<commit>/repl-mcp and the sources removed.
// The first build takes about 10 s with npm's cache warm (most of it the npm install; a minute or so when
// npm has to download the packages); later runs reuse the binary. REPL_MCP_1X_BINARY names a 1.x binary
// to use instead.
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/**
 * main at the merge of issue 20's second half: the last commit before the product moved to the SDK's 2.x
 * packages (branch v2), with every other feature of that round, so the two builds differ by the SDK
 * migration and what came with it.
 */
export const PRODUCT_1X_COMMIT = "98506c53dd92608190f1c98c3e0bfcf240bffd43";

function cacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "repl-mcp-bench", PRODUCT_1X_COMMIT);
}

function run(argv: string[], cwd: string, what: string): void {
  // Child output goes to stderr, so the report on stdout stays clean.
  const result = Bun.spawnSync(argv, { cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  if (result.exitCode !== 0) {
    const said = `${result.stdout.toString()}${result.stderr.toString()}`.trim().slice(-2000);
    throw new Error(`building the 1.x product: ${what} failed (exit ${result.exitCode})\n${said}`);
  }
}

/** The 1.x binary: REPL_MCP_1X_BINARY, the cached build, or a new build of PRODUCT_1X_COMMIT. */
export async function product1x(root: string, log: (message: string) => void): Promise<string> {
  const given = process.env.REPL_MCP_1X_BINARY;
  if (given) {
    if (!existsSync(given)) throw new Error(`REPL_MCP_1X_BINARY=${given} does not exist`);
    return given;
  }
  const dir = cacheDir();
  const binary = join(dir, "repl-mcp");
  if (existsSync(binary)) {
    log(`1.x product: reusing ${binary} (built from ${PRODUCT_1X_COMMIT.slice(0, 7)})`);
    return binary;
  }
  const known = Bun.spawnSync(["git", "-C", root, "cat-file", "-e", `${PRODUCT_1X_COMMIT}^{commit}`]);
  if (known.exitCode !== 0) {
    throw new Error(
      `commit ${PRODUCT_1X_COMMIT} (the 1.x product) is not in this clone: fetch it ` +
        "(git fetch origin main) or set REPL_MCP_1X_BINARY to a 1.x build",
    );
  }
  log(
    `1.x product: building ${PRODUCT_1X_COMMIT.slice(0, 7)} into ${dir} once ` +
      "(git archive, npm ci, bun run release/build.ts; about 10 s, longer if npm must download)",
  );
  const began = performance.now();
  mkdirSync(dir, { recursive: true });
  // A private work directory: two benchmarks building at once never share a half-built tree.
  const work = mkdtempSync(join(dir, "build-"));
  try {
    const archive = join(work, "source.tar");
    const source = join(work, "source");
    mkdirSync(source);
    run(
      ["git", "-C", root, "archive", "--format=tar", "-o", archive, PRODUCT_1X_COMMIT],
      root,
      "git archive",
    );
    run(["tar", "-xf", archive, "-C", source], work, "tar");
    run(["npm", "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"], source, "npm ci");
    run([process.execPath, "run", "release/build.ts"], source, "bun run release/build.ts");
    // rename() is atomic: a reader sees no binary or a whole one.
    renameSync(join(source, "dist/repl-mcp"), binary);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  log(`1.x product: built in ${((performance.now() - began) / 1000).toFixed(1)} s`);
  return binary;
}
