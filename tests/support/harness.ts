// Drives the compiled binary the way an MCP client does: the SDK Client over real stdio, in either protocol
// era. Every server runs in its own temporary project with HOME and XDG directories inside it, and carries a
// unique tag in its environment so the test can find every process it left behind (the worker and guardian
// inherit it).
import { afterAll, afterEach, beforeAll, beforeEach } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type CallToolResult, Client, type ClientCapabilities } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { homeEnv } from "./home.ts";

/** A C call that holds the GIL with SIGINT blocked: no KeyboardInterrupt can reach Python code. */
export const STUCK_IN_C =
  "import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\nctypes.PyDLL(None).sleep(30)";

export const BINARY = resolve(process.env.REPL_MCP_BINARY ?? join(import.meta.dir, "../../dist/repl-mcp"));

/** The interpreter `python3` on PATH really runs (a pyenv shim resolved), for fixtures that wrap it. */
export const REAL_PYTHON = Bun.spawnSync(["python3", "-c", "import sys; print(sys.executable)"])
  .stdout.toString()
  .trim();

/**
 * Which protocol era a test client speaks: `legacy` is the 2025-11-25 `initialize` handshake (what the SDK
 * client does by default), `modern` the stateless 2026-07-28 revision, where `execute_python` and
 * `python_start` must name a session.
 */
export type Era = "legacy" | "modern";
export const MODERN_VERSION = "2026-07-28";

/** An SDK client for `era`; a modern one is pinned, so a server that cannot speak 2026-07-28 fails loudly. */
export function eraClient(name: string, era: Era, capabilities?: ClientCapabilities): Client {
  const info = { name, version: "0.0.0" };
  return era === "modern"
    ? new Client(info, { versionNegotiation: { mode: { pin: MODERN_VERSION } }, capabilities })
    : new Client(info, { capabilities });
}

/**
 * The SDK probes `server/discover` on a disposable second copy of the server when it is given its own base
 * stdio transport; a subclass is probed in place, so a modern harness starts exactly one server.
 */
class InPlaceStdioTransport extends StdioClientTransport {}

/** The tool calls that the modern era refuses without a `session_id`. */
const NEEDS_SESSION = new Set(["execute_python", "python_start"]);

export type ToolResult = CallToolResult & { structuredContent: Record<string, any> };

/** Tool calls through one SDK client of either era; the stdio harness and the HTTP clients share it. */
export class ToolClient {
  readonly client: Client;
  private defaultSession?: string;

  constructor(
    name: string,
    readonly era: Era,
    private readonly timeoutMs: number,
    capabilities?: ClientCapabilities,
  ) {
    this.client = eraClient(name, era, capabilities);
  }

  /** Calls a tool with exactly these arguments (nothing is added in either era). */
  async call(name: string, args: Record<string, unknown> = {}, options: { signal?: AbortSignal } = {}) {
    return (await this.client.callTool(
      { name, arguments: args },
      { timeout: this.timeoutMs, signal: options.signal },
    )) as ToolResult;
  }

  /**
   * Calls a tool as a client of this era would: in the modern era a call that must name a session and does
   * not gets the default session's id (read once from python_health), so one check runs in both eras.
   */
  async callInSession(
    name: string,
    args: Record<string, unknown> = {},
    options: { signal?: AbortSignal } = {},
  ) {
    const needs = this.era === "modern" && NEEDS_SESSION.has(name) && !("session_id" in args);
    return await this.call(name, needs ? { ...args, session_id: await this.sessionId() } : args, options);
  }

  /** Runs one cell and returns its structured result (in the default session, in either era). */
  async run(code: string, args: Record<string, unknown> = {}) {
    return (await this.callInSession("execute_python", { code, ...args })).structuredContent;
  }

  async health() {
    return (await this.call("python_health")).structuredContent;
  }

  /** The default session's id, as python_health reports it: what a 2026-07-28 client must pass. */
  async sessionId(): Promise<string> {
    this.defaultSession ??= (await this.health()).server.session_id as string;
    return this.defaultSession;
  }
}

export interface ServerOptions {
  /** The protocol era the client speaks (default: legacy). */
  era?: Era;
  /** Another build of the binary (default: BINARY). */
  binary?: string;
  args?: string[];
  env?: Record<string, string>;
  /** Working directory; defaults to a fresh project directory. */
  cwd?: string;
  /** Prepares the project directory (e.g. writes .mcp.json) before the server starts. */
  beforeStart?: (project: string) => void;
  /** What the client declares (e.g. elicitation); its handlers are set on `client` before connecting. */
  capabilities?: ClientCapabilities;
  /** Called with the client before it connects (request handlers for elicitation, ...). */
  beforeConnect?: (client: Client) => void;
  /** A later server of the same user and project: this harness's home and project directory are reused. */
  after?: Harness;
}

/** Runs a cell and returns its value, failing the test with the cell's error and stderr if it failed. */
export async function cellValue(harness: Harness, code: string) {
  const result = await harness.run(code);
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
  return result.value;
}

export function tempDir(prefix = "repl-mcp-test-"): string {
  return realpathSync(mkdtempSync(join(tmpdir(), prefix)));
}

export class Harness extends ToolClient {
  readonly tag = crypto.randomUUID();
  readonly dir: string;
  readonly project: string;
  readonly home: string;
  private transport!: StdioClientTransport;
  stderr = "";

  private constructor(era: Era, capabilities?: ClientCapabilities, after?: Harness) {
    super("repl-mcp-tests", era, 600_000, capabilities);
    this.dir = tempDir();
    this.project = after?.project ?? join(this.dir, "project");
    this.home = after?.home ?? join(this.dir, "home");
    if (!after) {
      mkdirSync(this.project);
      mkdirSync(this.home);
    }
  }

  static async start(options: ServerOptions = {}): Promise<Harness> {
    const harness = new Harness(options.era ?? "legacy", options.capabilities, options.after);
    options.beforeStart?.(harness.project);
    options.beforeConnect?.(harness.client);
    harness.transport = new InPlaceStdioTransport({
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
    return { ...homeEnv(this.home), REPL_MCP_TEST_TAG: this.tag, ...extra };
  }

  get serverPid(): number {
    return this.transport.pid as number;
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

/** The tools that take no session (every other tool is routed to one by `session_id`). */
const UNROUTED = new Set([
  "python_session_open",
  "python_session_close",
  "python_session_list",
  "python_health",
]);

/**
 * A session of its own on a server that a test file shares, with a project directory of its own. A
 * server per test costs a few tenths of a second of CPU to start; a session only its interpreter probe.
 * Routed tools called through it carry its `session_id`, so a test reads as it would against a server of
 * its own.
 */
export class SessionClient {
  private constructor(
    readonly harness: Harness,
    readonly id: string,
    /** A directory of this session's own, holding its project. */
    readonly dir: string,
    readonly project: string,
  ) {}

  static async open(
    harness: Harness,
    options: {
      /** Prepares the project directory (e.g. writes .mcp.json) before the session opens. */
      beforeOpen?: (project: string) => void;
      /** The session's interpreter (python_session_open's `python`; default: the server's choice). */
      python?: string;
    } = {},
  ): Promise<SessionClient> {
    const dir = realpathSync(mkdtempSync(join(harness.dir, "session-")));
    const project = join(dir, "project");
    mkdirSync(project);
    options.beforeOpen?.(project);
    const python = options.python === undefined ? {} : { python: options.python };
    const opened = await harness.call("python_session_open", { name: "test", project, ...python });
    if (opened.isError)
      throw new Error(`python_session_open failed: ${JSON.stringify(opened.structuredContent)}`);
    return new SessionClient(harness, opened.structuredContent.session_id as string, dir, project);
  }

  call(name: string, args: Record<string, unknown> = {}, options: { signal?: AbortSignal } = {}) {
    return this.harness.call(name, UNROUTED.has(name) ? args : { session_id: this.id, ...args }, options);
  }

  /** Runs one cell in this session and returns its structured result. */
  async run(code: string, args: Record<string, unknown> = {}) {
    return (await this.call("execute_python", { code, ...args })).structuredContent;
  }

  /** Closes the session (its worker stops) and removes its directory; the server goes on. */
  async close(): Promise<void> {
    const closed = await this.harness.call("python_session_close", { session_id: this.id });
    if (closed.isError)
      throw new Error(`python_session_close failed: ${JSON.stringify(closed.structuredContent)}`);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** What a test sees of its session, whether it holds the SessionClient or the file's `sessionPerTest`. */
export type TestSession = Pick<SessionClient, "id" | "dir" | "project" | "call" | "run">;

/**
 * One server for a test file and a session of its own for each of its tests. It registers the file's
 * hooks, so a test file calls it at its top level (a helper module must not: under --no-isolate its hooks
 * would apply to every later file of the worker). Returns the running test's session.
 */
export function sessionPerTest(): TestSession & { readonly server: Harness } {
  let server: Harness | undefined;
  let current: SessionClient | undefined;
  beforeAll(async () => {
    server = await Harness.start();
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(async () => {
    current = await SessionClient.open(server as Harness);
  });
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  const session = (): SessionClient => {
    if (!current) throw new Error("the file's session exists only while a test runs");
    return current;
  };
  return {
    /** The file's server, for what a client does beyond tool calls (resources, tasks). */
    get server() {
      if (!server) throw new Error("the file's server exists only while its tests run");
      return server;
    },
    get id() {
      return session().id;
    },
    get dir() {
      return session().dir;
    },
    get project() {
      return session().project;
    },
    call: (...args) => session().call(...args),
    run: (...args) => session().run(...args),
  };
}

export function taggedPids(tag: string): number[] {
  return pidsWithEnv(`REPL_MCP_TEST_TAG=${tag}`);
}

/** Live processes (other than this one) whose environment holds `entry` (NAME=value) whole. */
export function pidsWithEnv(entry: string): number[] {
  // Each NUL-terminated entry of /proc/<pid>/environ is matched whole. Runs often (every wait for
  // processes to go), over every process of a parallel run, so only a match costs a second read.
  const needle = `\0${entry}\0`;
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (!`\0${readFileSync(`/proc/${name}/environ`, "latin1")}`.includes(needle)) continue;
      if (pidAlive(pid)) found.push(pid);
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
