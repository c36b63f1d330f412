// Drives the compiled binary as an HTTP server: spawned with --transport http --port 0 in its own temp
// project, its URL read from the last line it prints on stderr and the bearer token it generated from
// the file it names there (as a user would), clients connected with the SDK's Streamable HTTP client
// transport and that token, in either protocol era. Every process it starts carries a tag, as in
// harness.ts.
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  type Client,
  type ClientCapabilities,
  StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import { BINARY, type Era, ToolClient, taggedPids, tempDir, waitFor } from "./harness.ts";
import { homeEnv } from "./home.ts";

export class HttpServer {
  readonly tag = crypto.randomUUID();
  readonly dir = tempDir("repl-mcp-http-");
  readonly project = join(this.dir, "project");
  readonly home = join(this.dir, "home");
  proc!: ReturnType<typeof Bun.spawn>;
  url = "";
  /** The generated token and the file the server named for it; "" when the server made none. */
  token = "";
  tokenFile = "";
  stderr = "";
  stdout = "";
  private readonly clients: HttpClient[] = [];

  private constructor() {
    mkdirSync(this.project);
    mkdirSync(this.home);
  }

  /** Starts the server and waits for its URL line; `expectExit` instead waits for it to refuse. */
  static async start(
    args: string[] = [],
    env: Record<string, string> = {},
    beforeStart?: (project: string) => void,
  ): Promise<HttpServer> {
    const server = HttpServer.spawn(args, env, beforeStart);
    await waitFor(() => server.url !== "" || server.proc.exitCode !== null, {
      timeoutMs: 15_000,
      what: "the URL line on stderr",
    });
    if (!server.url) throw new Error(`server exited: ${server.stderr}`);
    return server;
  }

  /** `beforeStart` prepares the project directory (e.g. writes .mcp.json) before the server starts. */
  static spawn(
    args: string[],
    env: Record<string, string> = {},
    beforeStart?: (project: string) => void,
  ): HttpServer {
    const server = new HttpServer();
    beforeStart?.(server.project);
    server.proc = Bun.spawn([BINARY, "--transport", "http", "--port", "0", ...args], {
      cwd: server.project,
      env: {
        ...homeEnv(server.home),
        REPL_MCP_TEST_TAG: server.tag,
        ...env,
      },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    void server.collect(server.proc.stdout as ReadableStream<Uint8Array>, "stdout");
    void server.collect(server.proc.stderr as ReadableStream<Uint8Array>, "stderr");
    return server;
  }

  private async collect(stream: ReadableStream<Uint8Array>, into: "stdout" | "stderr") {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      this[into] += decoder.decode(chunk, { stream: true });
      const match = /serving MCP over HTTP at (http:\/\/\S+)/.exec(this.stderr);
      if (match && !this.url) {
        // The token lines come before the URL line, so they are all here once it is.
        const file = /kept in:\n {2}(.+)\n/.exec(this.stderr)?.[1];
        if (file) {
          this.tokenFile = file;
          this.token = readFileSync(file, "utf8").trim();
        }
        this.url = match[1] as string;
      }
    }
  }

  /** The Authorization header for the generated token (none when the server made no token). */
  get auth(): Record<string, string> {
    return this.token ? { authorization: `Bearer ${this.token}` } : {};
  }

  /** A raw POST to /mcp with the server's token (and `headers` over it). */
  post(body: string, headers: Record<string, string> = {}): Promise<Response> {
    return post(this.url, body, { ...this.auth, ...headers });
  }

  /**
   * A connected client; `era` defaults to legacy (a 2025-11-25 session over `Mcp-Session-Id`).
   * `capabilities` are what it declares; `beforeConnect` sets its request handlers (elicitation).
   */
  async connect(
    headers: Record<string, string> = this.auth,
    {
      era = "legacy",
      capabilities,
      beforeConnect,
    }: { era?: Era; capabilities?: ClientCapabilities; beforeConnect?: (client: Client) => void } = {},
  ): Promise<HttpClient> {
    const client = new HttpClient(this.url, headers, era, capabilities);
    beforeConnect?.(client.client);
    await client.client.connect(client.transport);
    this.clients.push(client);
    return client;
  }

  /** Workers and guardians (everything tagged except the server itself). */
  children(): number[] {
    return taggedPids(this.tag).filter((pid) => pid !== this.proc.pid);
  }

  async exitCode(): Promise<number> {
    return await this.proc.exited;
  }

  async stop(): Promise<void> {
    for (const client of this.clients) await client.client.close().catch(() => undefined);
    if (this.proc.exitCode === null) this.proc.kill("SIGTERM");
    await this.proc.exited;
    await waitFor(() => taggedPids(this.tag).length === 0, {
      timeoutMs: 10_000,
      what: "tagged processes to exit",
    });
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class HttpClient extends ToolClient {
  readonly transport: StreamableHTTPClientTransport;

  constructor(url: string, headers: Record<string, string>, era: Era, capabilities?: ClientCapabilities) {
    super("repl-mcp-http-tests", era, 120_000, capabilities);
    this.transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  }
}

/** A raw request to the server, for the refusals the SDK client would never send. */
export async function post(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
  });
}

export const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
});
