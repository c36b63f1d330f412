// Drives the compiled binary over raw stdio, for tests that must write bytes no SDK client would send
// (broken lines, huge lines) or read stdout themselves. Every stdout line is checked to be JSON-RPC.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { BINARY, taggedPids, tempDir, waitFor } from "./harness.ts";
import { homeEnv } from "./home.ts";

export interface RawOptions {
  args?: string[];
  env?: Record<string, string>;
  beforeStart?: (project: string) => void;
  /**
   * "legacy" (default): an `initialize` handshake first. "modern": no handshake; every request carries
   * the 2026-07-28 `_meta` envelope (see `envelope`). "none": nothing is sent; the test opens itself.
   */
  era?: "legacy" | "modern" | "none";
}

/** The 2026-07-28 per-request envelope; `capabilities` are the client capabilities it declares. */
export function envelope(capabilities: Record<string, unknown> = {}, version = "2026-07-28") {
  return {
    "io.modelcontextprotocol/protocolVersion": version,
    "io.modelcontextprotocol/clientInfo": { name: "raw", version: "0" },
    "io.modelcontextprotocol/clientCapabilities": capabilities,
  };
}

type Message = Record<string, any>;

export class RawServer {
  readonly messages: Message[] = [];
  /** stdout lines that were not a JSON-RPC 2.0 object: must stay empty. */
  readonly corrupt: string[] = [];
  stderr = "";
  private nextId = 1_000;
  /** Under the 2026-07-28 era, what each request's params._meta starts from. */
  meta: Record<string, unknown> | undefined;

  private constructor(
    readonly proc: Bun.Subprocess<"pipe", "pipe", "pipe">,
    readonly dir: string,
    readonly project: string,
    readonly tag: string,
  ) {
    void this.readStdout();
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of proc.stderr) this.stderr += decoder.decode(chunk, { stream: true });
    })();
  }

  static async start(options: RawOptions = {}): Promise<RawServer> {
    const dir = tempDir();
    const project = join(dir, "project");
    const home = join(dir, "home");
    mkdirSync(project);
    mkdirSync(home);
    options.beforeStart?.(project);
    const tag = crypto.randomUUID();
    const proc = Bun.spawn([BINARY, ...(options.args ?? [])], {
      cwd: project,
      env: {
        ...homeEnv(home),
        REPL_MCP_TEST_TAG: tag,
        ...options.env,
      },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const server = new RawServer(proc, dir, project, tag);
    if (options.era === "modern") server.meta = envelope();
    else if (options.era !== "none") await server.initialize();
    return server;
  }

  async initialize(): Promise<void> {
    const reply = await this.request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "raw", version: "0" },
    });
    if (!reply.result) throw new Error(`initialize failed: ${JSON.stringify(reply)}`);
    this.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  }

  write(bytes: string | Uint8Array): void {
    this.proc.stdin.write(bytes);
    void this.proc.stdin.flush();
  }

  send(message: unknown): void {
    this.write(`${JSON.stringify(message)}\n`);
  }

  /** Sends a request and waits for the message answering its id. */
  async request(method: string, params: unknown, timeoutMs = 30_000): Promise<Message> {
    const id = this.nextId++;
    if (this.meta) {
      const own = (params as { _meta?: Record<string, unknown> } | undefined)?._meta;
      params = { ...(params as object), _meta: { ...this.meta, ...own } };
    }
    this.send({ jsonrpc: "2.0", id, method, params });
    return this.waitMessage((message) => message.id === id, timeoutMs);
  }

  /** A tools/call; returns the whole JSON-RPC response. */
  call(name: string, args: unknown, timeoutMs = 60_000): Promise<Message> {
    return this.request("tools/call", { name, arguments: args }, timeoutMs);
  }

  async run(code: string): Promise<Message> {
    const reply = await this.call("execute_python", { code });
    if (!reply.result) throw new Error(`execute_python failed: ${JSON.stringify(reply)}`);
    return reply.result.structuredContent;
  }

  /** The first message (already received or still to come) that matches. */
  async waitMessage(match: (message: Message) => boolean, timeoutMs = 30_000): Promise<Message> {
    let found: Message | undefined;
    await waitFor(
      () => {
        found = this.messages.find(match);
        return found !== undefined || this.proc.exitCode !== null;
      },
      { timeoutMs, what: "a matching message from the server" },
    );
    if (!found)
      throw new Error(`server exited (${this.proc.exitCode}) before answering; stderr:\n${this.stderr}`);
    return found;
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Processes of ours other than the server (guardians, workers, peers). */
  children(): number[] {
    return taggedPids(this.tag).filter((pid) => pid !== this.proc.pid);
  }

  /** Ends stdin, waits for the server and everything it owned to exit, removes the directory. */
  async close(): Promise<void> {
    try {
      this.proc.stdin.end();
    } catch {
      // Already closed.
    }
    await waitFor(() => this.proc.exitCode !== null || this.proc.signalCode !== null, {
      timeoutMs: 15_000,
      what: "the server to exit",
    }).catch(() => this.proc.kill("SIGKILL"));
    await waitFor(() => taggedPids(this.tag).length === 0, {
      timeoutMs: 10_000,
      what: "tagged processes to exit",
    });
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Stops reading stdout (a client that hangs): the server's writes back up into the pipe. */
  pauseReading(): void {
    this.paused ??= new Promise<void>((resolve) => {
      this.resume = resolve;
    });
  }

  /** Reads again after pauseReading(). */
  resumeReading(): void {
    const resume = this.resume;
    this.paused = undefined;
    this.resume = undefined;
    resume?.();
  }

  private paused: Promise<void> | undefined;
  private resume: (() => void) | undefined;

  private async readStdout(): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    const reader = this.proc.stdout.getReader();
    for (;;) {
      if (this.paused) await this.paused;
      const { value: chunk, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(chunk, { stream: true });
      let nl = buffer.indexOf("\n");
      while (nl !== -1) {
        this.accept(buffer.slice(0, nl));
        buffer = buffer.slice(nl + 1);
        nl = buffer.indexOf("\n");
      }
    }
    if (buffer) this.corrupt.push(buffer);
  }

  private accept(line: string): void {
    try {
      const message = JSON.parse(line);
      if (message === null || typeof message !== "object" || message.jsonrpc !== "2.0") throw new Error();
      this.messages.push(message);
    } catch {
      this.corrupt.push(line);
    }
  }
}
