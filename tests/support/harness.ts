// Drives the compiled binary the way an MCP client does: the SDK Client over real stdio. Every server
// runs in its own temporary project with HOME and XDG directories inside it, and carries a unique tag in
// its environment so the test can find every process it left behind (the worker and guardian inherit it).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

/** A C call that holds the GIL with SIGINT blocked: no KeyboardInterrupt can reach Python code. */
export const STUCK_IN_C =
  "import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\nctypes.PyDLL(None).sleep(30)";

export const BINARY = resolve(process.env.REPL_MCP_BINARY ?? join(import.meta.dir, "../../dist/repl-mcp"));

/** The interpreter `python3` on PATH really runs (a pyenv shim resolved), for fixtures that wrap it. */
export const REAL_PYTHON = Bun.spawnSync(["python3", "-c", "import sys; print(sys.executable)"])
  .stdout.toString()
  .trim();

export interface ServerOptions {
  /** Another build of the binary (default: BINARY). */
  binary?: string;
  args?: string[];
  env?: Record<string, string>;
  /** Working directory; defaults to a fresh project directory. */
  cwd?: string;
  /** Prepares the project directory (e.g. writes .mcp.json) before the server starts. */
  beforeStart?: (project: string) => void;
}

export function tempDir(prefix = "repl-mcp-test-"): string {
  return realpathSync(mkdtempSync(join(tmpdir(), prefix)));
}

export class Harness {
  readonly client = new Client({ name: "repl-mcp-tests", version: "0.0.0" });
  readonly tag = crypto.randomUUID();
  readonly dir: string;
  readonly project: string;
  readonly home: string;
  private transport!: StdioClientTransport;
  stderr = "";

  private constructor() {
    this.dir = tempDir();
    this.project = join(this.dir, "project");
    this.home = join(this.dir, "home");
    mkdirSync(this.project);
    mkdirSync(this.home);
  }

  static async start(options: ServerOptions = {}): Promise<Harness> {
    const harness = new Harness();
    options.beforeStart?.(harness.project);
    harness.transport = new StdioClientTransport({
      command: options.binary ?? BINARY,
      args: options.args ?? [],
      cwd: options.cwd ?? harness.project,
      env: harness.env(options.env),
      stderr: "pipe",
    });
    harness.transport.stderr?.on("data", (chunk: Buffer) => {
      harness.stderr += chunk.toString();
    });
    await harness.client.connect(harness.transport);
    return harness;
  }

  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: this.home,
      XDG_CACHE_HOME: join(this.home, ".cache"),
      XDG_CONFIG_HOME: join(this.home, ".config"),
      REPL_MCP_TEST_TAG: this.tag,
      ...extra,
    };
  }

  get serverPid(): number {
    return this.transport.pid as number;
  }

  async call(name: string, args: Record<string, unknown> = {}, options: { signal?: AbortSignal } = {}) {
    return (await this.client.callTool({ name, arguments: args }, undefined, {
      timeout: 600_000,
      signal: options.signal,
    })) as CallToolResult & { structuredContent: Record<string, any> };
  }

  /** Runs one cell and returns its structured result. */
  async run(code: string, args: Record<string, unknown> = {}) {
    const result = await this.call("execute_python", { code, ...args });
    return result.structuredContent;
  }

  async health() {
    return (await this.call("python_health")).structuredContent;
  }

  /** Processes other than the server itself still carrying this harness's tag (guardians, workers). */
  children(): number[] {
    return taggedPids(this.tag).filter((pid) => pid !== this.serverPid);
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => {});
    await waitFor(() => taggedPids(this.tag).length === 0, {
      timeoutMs: 10_000,
      what: "tagged processes to exit",
    });
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function taggedPids(tag: string): number[] {
  const needle = `REPL_MCP_TEST_TAG=${tag}`;
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      if (readFileSync(`/proc/${entry}/environ`, "latin1").split("\0").includes(needle))
        found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

export function pidAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
}

/** Polls until `check` holds; throws with `what` when the deadline passes. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  { timeoutMs = 5_000, intervalMs = 25, what = "condition" } = {},
): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await check()) return performance.now() - start;
    if (performance.now() - start > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(intervalMs);
  }
}
