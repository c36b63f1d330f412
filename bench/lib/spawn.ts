// Plain process helpers: timing a short-lived command, running one for its output, compiling a reference.
import { closeSync } from "node:fs";
import { join } from "node:path";
import { COMPILE_FLAGS, profiledCompile } from "../../release/build.ts";

/** The flags release/build.ts compiles the product with; the reference gets exactly the same. */
export { COMPILE_FLAGS };

/** Milliseconds from spawn to exit of a command whose output is discarded; throws if it fails. */
export async function timeCommand(argv: string[], env: Record<string, string>): Promise<number> {
  const started = performance.now();
  const proc = Bun.spawn(argv, { env, stdin: "ignore", stdout: "ignore", stderr: "ignore" });
  const code = await proc.exited;
  const elapsed = performance.now() - started;
  if (code !== 0) throw new Error(`${argv.join(" ")} exited with ${code}`);
  return elapsed;
}

/** Runs a command to completion and returns its trimmed stdout; throws with stderr if it fails. */
export function output(argv: string[], env: Record<string, string>, cwd?: string): string {
  const result = Bun.spawnSync(argv, { env, cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  if (result.exitCode !== 0) {
    throw new Error(`${argv.join(" ")} exited with ${result.exitCode}: ${result.stderr.toString().trim()}`);
  }
  return result.stdout.toString().trim();
}

/** The stdio peer of the brokered-call measurements, run from source by this Bun. */
export function echoPeer(root: string): string[] {
  return [process.execPath, join(root, "bench/references/echo-peer.ts")];
}

/**
 * Compiles the reference server (bench/references/trivial-server.ts) exactly as the product is built:
 * the same flags, and a bytecode profile recorded from its own run as the composed floor.
 */
export async function compileReference(root: string, outfile: string, python: string): Promise<void> {
  const references = join(root, "bench/references");
  await profiledCompile({
    entry: join(references, "trivial-server.ts"),
    outfile,
    session: {
      args: ["--eval-loop", python, join(references, "eval-loop.py")],
      calls: [
        { name: "noop", arguments: {} },
        { name: "execute_python", arguments: { code: "1+1" } },
        { name: "execute_python", arguments: { code: "x = [i * i for i in range(10)]\nprint(x)\nx[-1]" } },
        { name: "execute_python", arguments: { code: "1/0" } },
      ],
    },
  });
  if (!Bun.file(outfile).size) throw new Error(`compiling the reference produced no ${outfile}`);
}

/** The floor bridge's arguments: its eval loop, and the peer it forwards a cell's calls to. */
export function floorBridgeArgs(root: string, python: string): string[] {
  return ["--eval-loop", python, join(root, "bench/references/eval-loop.py"), "--peer", ...echoPeer(root)];
}

/** The floor bridge (bench/references/floor-bridge.ts), built like the reference server. */
export async function compileFloorBridge(root: string, outfile: string, python: string): Promise<void> {
  await profiledCompile({
    entry: join(root, "bench/references/floor-bridge.ts"),
    outfile,
    session: {
      args: floorBridgeArgs(root, python),
      calls: [
        { name: "execute_python", arguments: { code: "1+1" } },
        { name: "execute_python", arguments: { code: "[call('echo', {'text': 'x'}) for _ in range(3)]" } },
      ],
    },
  });
  if (!Bun.file(outfile).size) throw new Error(`compiling the floor bridge produced no ${outfile}`);
}

/** process.env without undefined values, as Bun.spawn and the SDK transport want it. */
export function cleanEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries({ ...process.env, ...extra })) {
    if (value !== undefined) env[key] = value;
  }
  return env;
}

/**
 * Milliseconds a guardian (the binary's hidden mode) needs to start and react to its lifeline: it is
 * spawned exactly as the server spawns it (own session, control and event pipes on fds 3 and 4) and its
 * control pipe is closed at once. It ends itself (by a signal to its own group), so any exit counts.
 */
export async function timeGuardian(binary: string, env: Record<string, string>): Promise<number> {
  const started = performance.now();
  const proc = Bun.spawn([binary, "--internal-guardian", "0"], {
    env,
    stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"],
    detached: true,
  });
  for (const fd of [proc.stdio[3], proc.stdio[4]]) {
    try {
      closeSync(fd as unknown as number);
    } catch {}
  }
  const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
  await proc.exited;
  clearTimeout(timer);
  return performance.now() - started;
}
