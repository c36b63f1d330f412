// Compiles the standalone repl-mcp binary. With no arguments it builds dist/repl-mcp for this
// machine; `--target bun-<os>-<arch> --outfile PATH` cross-compiles for another platform.

import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { PRODUCT_SESSION, type ProfileSession, recordBytecodeOrder } from "./profile.ts";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
export const PRODUCT_ENTRY = join(root, "src/main.ts");

/**
 * The flags every build of the product uses (dist/, release assets, and the benchmark's reference).
 * `--bytecode` (which needs ESM output once chunks are split) halves the time from spawn to the first
 * MCP answer: the runtime loads precompiled bytecode instead of parsing the bundle on every start.
 * Every build also gets `--bytecode-order` with a profile recorded from a run of the same code
 * (`profiledCompile`, release/profile.ts).
 */
export const COMPILE_FLAGS = [
  "--compile",
  // The binary runs in users' directories: it must never pick up their .env or bunfig.toml.
  "--no-compile-autoload-dotenv",
  "--no-compile-autoload-bunfig",
  // Separate chunks let the guardian mode start without parsing the MCP server's code: 4x faster,
  // 8 MiB smaller per guardian.
  "--splitting",
  "--format=esm",
  "--bytecode",
  "--minify",
] as const;

export interface CompileOptions {
  entry: string;
  outfile: string;
  /** `bun-<os>-<arch>`; the host when absent. */
  target?: string;
  /** Profiles for `--bytecode-order`, most important first. */
  bytecodeOrder?: string[];
}

export async function compile(options: CompileOptions): Promise<void> {
  mkdirSync(dirname(options.outfile), { recursive: true });
  const args = [
    process.execPath,
    "build",
    ...COMPILE_FLAGS,
    ...(options.bytecodeOrder?.length ? [`--bytecode-order=${options.bytecodeOrder.join(",")}`] : []),
    ...(options.target ? [`--target=${options.target}`] : []),
    options.entry,
    "--outfile",
    options.outfile,
  ];
  // Bun's progress lines go to stderr, so a benchmark's report on stdout stays clean.
  const proc = Bun.spawn(args, { cwd: root, stdout: 2, stderr: "inherit" });
  const code = await proc.exited;
  if (code !== 0) throw new Error(`bun build failed with exit code ${code}`);
}

/**
 * Builds `entry` for this machine, records which of its functions `session` uses, and returns the
 * profiles (kept in `workdir`) to build any target with. One profile serves every target.
 */
export async function recordProfile(
  entry: string,
  session: ProfileSession,
  workdir: string,
): Promise<string[]> {
  const probe = join(workdir, "probe");
  await compile({ entry, outfile: probe });
  const profiles = join(workdir, "profiles");
  mkdirSync(profiles);
  try {
    return await recordBytecodeOrder(probe, session, profiles);
  } finally {
    rmSync(probe, { force: true });
  }
}

/** The whole build of one binary: record a profile of `entry`, then compile it with that profile. */
export async function profiledCompile(
  options: Omit<CompileOptions, "bytecodeOrder"> & { session: ProfileSession },
): Promise<void> {
  const workdir = mkdtempSync(join(tmpdir(), "repl-mcp-build-"));
  try {
    const bytecodeOrder = await recordProfile(options.entry, options.session, workdir);
    await compile({ ...options, bytecodeOrder });
  } finally {
    rmSync(workdir, { recursive: true, force: true });
  }
}

/** The product: src/main.ts recorded through PRODUCT_SESSION. */
export function compileProduct(options: { outfile: string; target?: string }): Promise<void> {
  return profiledCompile({ ...options, entry: PRODUCT_ENTRY, session: PRODUCT_SESSION });
}

/** The product's profiles, recorded once for a release that compiles several targets. */
export function recordProductProfile(workdir: string): Promise<string[]> {
  return recordProfile(PRODUCT_ENTRY, PRODUCT_SESSION, workdir);
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { target: { type: "string" }, outfile: { type: "string" } },
  });
  await compileProduct({
    target: values.target,
    outfile: resolve(values.outfile ?? join(root, "dist/repl-mcp")),
  });
}
