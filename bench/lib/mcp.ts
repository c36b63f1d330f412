// Starting an MCP server over stdio with the SDK Client and stopping it without leaving anything behind.
import { type CallToolResult, Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { processTree, waitGone } from "./proc.ts";

export interface ServerSpec {
  label: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
}

const STDERR_KEEP_BYTES = 8192;
const open = new Set<Served>();
/** Processes that outlived a clean stop and had to be killed; reported at the end of the run. */
export const leftovers: string[] = [];

export class Served {
  readonly client = new Client({ name: "repl-mcp-bench", version: "0.0.0" }, { capabilities: {} });
  readonly transport: StdioClientTransport;
  private stderrTail = "";
  private stopped: Promise<void> | undefined;

  constructor(readonly spec: ServerSpec) {
    this.transport = new StdioClientTransport({
      command: spec.command,
      args: spec.args,
      env: spec.env,
      cwd: spec.cwd,
      stderr: "pipe",
    });
    // Always drain stderr (an unread pipe can stall a chatty child); keep the tail for error reports.
    this.transport.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-STDERR_KEEP_BYTES);
    });
  }

  get pid(): number {
    const pid = this.transport.pid;
    if (pid === null) throw new Error(`${this.spec.label}: not running`);
    return pid;
  }

  /** Spawns the server and completes the MCP handshake; resolves with the elapsed milliseconds. */
  async connect(): Promise<number> {
    open.add(this);
    const started = performance.now();
    try {
      await this.client.connect(this.transport);
    } catch (error) {
      throw this.failure("initialize", error);
    }
    return performance.now() - started;
  }

  async call(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
    let result: CallToolResult;
    try {
      result = (await this.client.callTool({ name, arguments: args })) as CallToolResult;
    } catch (error) {
      throw this.failure(name, error);
    }
    if (result.isError) throw this.failure(name, new Error(JSON.stringify(result.content).slice(0, 500)));
    return result;
  }

  /** Ends stdin (the clean way out), then makes sure the server and every descendant are gone. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      const pid = this.transport.pid;
      const tree = pid === null ? [] : processTree(pid);
      await this.client.close().catch(() => {});
      const stuck = await waitGone(tree, 5_000);
      for (const straggler of stuck) {
        leftovers.push(`${this.spec.label}: pid ${straggler} still alive 5 s after stdin EOF; killed`);
        try {
          process.kill(straggler, "SIGKILL");
        } catch {}
      }
      await waitGone(stuck, 2_000);
      open.delete(this);
    })();
    return this.stopped;
  }

  private failure(what: string, error: unknown): Error {
    const tail = this.stderrTail.trim();
    return new Error(
      `${this.spec.label}: ${what} failed: ${(error as Error).message ?? error}` +
        (tail ? `\n--- server stderr (tail) ---\n${tail}` : ""),
    );
  }
}

/** Starts a server, returns it connected, with the spawn → initialize time. */
export async function start(spec: ServerSpec): Promise<{ served: Served; initMs: number }> {
  const served = new Served(spec);
  try {
    const initMs = await served.connect();
    return { served, initMs };
  } catch (error) {
    await served.stop();
    throw error;
  }
}

/** Runs fn against a freshly started server and always stops it afterwards. */
export async function withServer<T>(spec: ServerSpec, fn: (served: Served, initMs: number) => Promise<T>) {
  const { served, initMs } = await start(spec);
  try {
    return await fn(served, initMs);
  } finally {
    await served.stop();
  }
}

export async function stopAll(): Promise<void> {
  await Promise.all([...open].map((served) => served.stop()));
}

/** The text of a tool result's first text block. */
export function textOf(result: CallToolResult): string {
  const block = result.content.find((item) => item.type === "text");
  return block && block.type === "text" ? block.text : "";
}
