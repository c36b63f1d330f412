// A server under fault injection: the compiled binary on raw pipes, driven by the SDK Client through a
// transport of the test's own that checks every line the server writes on stdout. A fault test can then
// assert the three things every fault must leave intact: the server still answers (or exited as the
// contract says), stdout carried only JSON-RPC, and no process of ours survives.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, type JSONRPCMessage, type Transport } from "@modelcontextprotocol/client";
import { BINARY, type ToolResult, taggedPids, tempDir, waitFor } from "../support/harness.ts";
import { homeEnv } from "../support/home.ts";

export interface FaultServerOptions {
  args?: string[];
  env?: Record<string, string>;
  /** The project's `.mcp.json` servers, when the fault needs a peer. */
  registry?: Record<string, unknown>;
}

const JSONRPC_KEYS = new Set(["jsonrpc", "id", "method", "params", "result", "error"]);

/** True when `line` is one JSON-RPC 2.0 message (request, notification, response or error). */
export function isJsonRpc(line: string): boolean {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return false;
  }
  if (typeof message !== "object" || message === null || Array.isArray(message)) return false;
  const record = message as Record<string, unknown>;
  if (record.jsonrpc !== "2.0") return false;
  if (!Object.keys(record).every((key) => JSONRPC_KEYS.has(key))) return false;
  if (typeof record.method === "string") return true;
  return "result" in record !== "error" in record && "id" in record;
}

class CheckedTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;

  constructor(private readonly server: FaultServer) {}

  async start(): Promise<void> {
    this.server.onLine = (line) => {
      if (isJsonRpc(line)) this.onmessage?.(JSON.parse(line));
    };
    void this.server.proc.exited.then(() => this.onclose?.());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    this.server.writeLine(JSON.stringify(message));
  }

  async close(): Promise<void> {
    this.server.endInput();
  }
}

export class FaultServer {
  readonly tag = crypto.randomUUID();
  readonly dir = tempDir("repl-mcp-fault-");
  readonly project = join(this.dir, "project");
  readonly home = join(this.dir, "home");
  readonly client = new Client({ name: "repl-mcp-faults", version: "0.0.0" });
  /** Every line the server wrote on stdout, in order. */
  readonly lines: string[] = [];
  stderr = "";
  onLine: (line: string) => void = () => {};
  proc!: ReturnType<typeof Bun.spawn> & { stdin: import("bun").FileSink };
  private inputOpen = true;

  static async start(options: FaultServerOptions = {}): Promise<FaultServer> {
    const server = new FaultServer();
    await server.spawn(options);
    await server.client.connect(new CheckedTransport(server));
    return server;
  }

  /** Starts the binary without the MCP handshake, for faults that speak raw lines. */
  static async raw(options: FaultServerOptions = {}): Promise<FaultServer> {
    const server = new FaultServer();
    await server.spawn(options);
    return server;
  }

  private async spawn(options: FaultServerOptions): Promise<void> {
    mkdirSync(this.project);
    mkdirSync(this.home);
    if (options.registry)
      writeFileSync(join(this.project, ".mcp.json"), JSON.stringify({ mcpServers: options.registry }));
    this.proc = Bun.spawn([BINARY, ...(options.args ?? [])], {
      cwd: this.project,
      env: {
        ...homeEnv(this.home),
        REPL_MCP_TEST_TAG: this.tag,
        ...options.env,
      },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    }) as FaultServer["proc"];
    void this.readStdout();
    void this.readStderr();
  }

  private async readStdout(): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of this.proc.stdout as ReadableStream<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let nl = buffer.indexOf("\n"); nl !== -1; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        this.lines.push(line);
        this.onLine(line);
      }
    }
    if (buffer) this.lines.push(buffer);
  }

  private async readStderr(): Promise<void> {
    const decoder = new TextDecoder();
    for await (const chunk of this.proc.stderr as ReadableStream<Uint8Array>) {
      this.stderr = (this.stderr + decoder.decode(chunk, { stream: true })).slice(-200_000);
    }
  }

  writeLine(line: string | Uint8Array): void {
    if (!this.inputOpen) return;
    if (typeof line === "string") this.proc.stdin.write(`${line}\n`);
    else {
      this.proc.stdin.write(line);
      this.proc.stdin.write("\n");
    }
    this.proc.stdin.flush();
  }

  endInput(): void {
    if (!this.inputOpen) return;
    this.inputOpen = false;
    try {
      this.proc.stdin.end();
    } catch {
      // Already closed by the server's exit.
    }
  }

  async call(name: string, args: Record<string, unknown> = {}, timeoutMs = 120_000) {
    return (await this.client.callTool({ name, arguments: args }, { timeout: timeoutMs })) as ToolResult;
  }

  /** Runs a cell; returns the structured result whether it failed or not. */
  async run(code: string, args: Record<string, unknown> = {}) {
    return (await this.call("execute_python", { code, ...args })).structuredContent;
  }

  /** The server answers a health call and a fresh cell (state may have been reset by the fault). */
  async assertServing(): Promise<void> {
    const health = await this.call("python_health", {}, 30_000);
    if (health.isError) throw new Error(`health failed after the fault: ${JSON.stringify(health)}`);
    const cell = await this.run("6 * 7");
    if (!cell.success || cell.value !== 42)
      throw new Error(`a fresh cell failed after the fault: ${JSON.stringify(cell)}`);
  }

  /** Lines on stdout that were not JSON-RPC messages. */
  invalidLines(): string[] {
    return this.lines.filter((line) => !isJsonRpc(line));
  }

  /** Processes other than the server carrying this server's tag. */
  children(): number[] {
    return taggedPids(this.tag).filter((pid) => pid !== this.proc.pid);
  }

  exited(): boolean {
    return this.proc.exitCode !== null || this.proc.signalCode !== null;
  }

  /** Ends the server (stdin EOF, then SIGKILL if it lingers) and waits until no tagged process is left. */
  async finish(): Promise<void> {
    this.endInput();
    await Promise.race([this.proc.exited, Bun.sleep(10_000)]);
    if (!this.exited()) this.proc.kill("SIGKILL");
    await this.proc.exited;
    await waitFor(() => taggedPids(this.tag).length === 0, {
      timeoutMs: 10_000,
      what: "every process of this server to exit",
    });
  }

  /** Last resort after a failed test: nothing of ours may outlive it. */
  destroy(): void {
    try {
      this.proc.kill("SIGKILL");
    } catch {}
    for (const pid of taggedPids(this.tag)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
