// A real client: Claude Code (the devDependency, offline, in an isolated HOME with no account) runs
// `claude mcp list`, which connects to every configured server and prints its status. Over stdio the server
// runs behind tests/support/record-stdio.ts, so the test sees every line either side sent: Claude Code opens
// with `server/discover` at 2026-07-28 and falls back to `initialize` only when that is refused; over HTTP a
// recording proxy does the same job. The 2026-only fixture peers show what a 2026 server's transcript looks
// like, with the same recorders and the same checks.
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { launchHttpPeer } from "../fixtures/peers/launch.ts";
import { readTranscript, recorded } from "../support/agents/client.ts";
import { BINARY, taggedPids, tempDir, waitFor } from "../support/harness.ts";
import { homeEnv } from "../support/home.ts";
import { HttpServer } from "../support/http.ts";
import { run } from "../support/run.ts";

const CLAUDE = join(import.meta.dir, "../../node_modules/.bin/claude");
const STDIO_PEER_2026 = join(import.meta.dir, "../fixtures/peers/stdio-peer-2026.ts");
const HTTP_PEER_2026 = join(import.meta.dir, "../fixtures/peers/http-peer-2026.ts");
const MODERN = "2026-07-28";
const TOKEN = "claude-code-test-token-0123456789";
const CONNECTED = "✔ Connected";

const undo: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of undo.splice(0).reverse()) await step();
});

/** A HOME and a project directory of Claude Code's own, and the environment that keeps it offline. */
class ClaudeHome {
  readonly dir = tempDir("repl-mcp-claude-");
  readonly home = join(this.dir, "home");
  readonly project = join(this.dir, "project");
  readonly tag = crypto.randomUUID();

  constructor() {
    mkdirSync(this.home);
    mkdirSync(this.project);
    undo.push(() => {
      // A test that failed half-way may leave the server running: nothing outlives the test.
      for (const pid of taggedPids(this.tag)) process.kill(pid, "SIGKILL");
      rmSync(this.dir, { recursive: true, force: true });
    });
  }

  env(): Record<string, string> {
    return {
      ...homeEnv(this.home),
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    };
  }

  async claude(...args: string[]): Promise<string> {
    const result = await run([CLAUDE, ...args], { cwd: this.project, env: this.env(), timeoutMs: 90_000 });
    const output = result.stdout + result.stderr;
    if (result.code !== 0) throw new Error(`claude ${args.join(" ")} exited ${result.code}: ${output}`);
    return output;
  }

  /** Configures a stdio server behind the recording wrapper; returns the transcript file. */
  async addRecorded(name: string, command: string[]): Promise<string> {
    const transcript = join(this.dir, `${name}.jsonl`);
    await this.claude(
      "mcp",
      "add",
      name,
      "-e",
      `REPL_MCP_TEST_TAG=${this.tag}`,
      "--",
      process.execPath,
      ...recorded(transcript, command),
    );
    return transcript;
  }

  /** `claude mcp list`, and the status it printed for `name` (the text after the server's " - "). */
  async status(name: string): Promise<string> {
    const listing = await this.claude("mcp", "list");
    const line = listing.split("\n").find((entry) => entry.startsWith(`${name}: `));
    if (!line) throw new Error(`claude mcp list printed no line for ${name}:\n${listing}`);
    return line.slice(line.lastIndexOf(" - ") + 3);
  }
}

type Message = { id?: unknown; method?: string; params?: Record<string, unknown> } & Record<string, unknown>;

interface Exchange {
  from: string;
  message: Message;
}

/**
 * What the transcript says about the opening, in words a failed comparison shows as they are: the first
 * request, how server/discover was answered, and whether initialize was sent.
 */
function opening(lines: Exchange[]) {
  const sent = lines.filter((entry) => entry.from === "client").map((entry) => entry.message);
  const at = lines.findIndex(
    (entry) => entry.from === "client" && entry.message.method === "server/discover",
  );
  const discover = lines[at]?.message;
  // The answer carries the request's id; a server that cannot tell which request it refuses answers with
  // id null, and over HTTP that answer is still the next message.
  const later = lines.slice(at + 1).filter((entry) => entry.from === "server");
  const answer = (later.find((entry) => entry.message.id === discover?.id) ?? later[0])?.message;
  let discoverAnswer = "no server/discover was sent";
  if (discover && !answer) discoverAnswer = "server/discover got no answer";
  if (answer && "error" in answer) {
    const error = answer.error as { code?: number; message?: string };
    discoverAnswer = `error ${error.code}: ${error.message}`;
  }
  if (answer && "result" in answer) {
    const result = answer.result as { supportedVersions?: unknown };
    discoverAnswer = `result, supportedVersions ${JSON.stringify(result.supportedVersions)}`;
  }
  if (answer && answer.id !== discover?.id)
    discoverAnswer += ` (answered with id ${JSON.stringify(answer.id)})`;
  const initialize = sent.find((message) => message.method === "initialize");
  return {
    firstRequest: sent[0]?.method ?? "nothing was sent",
    discoverAnswer,
    initialize: initialize
      ? `sent, protocolVersion ${String(initialize.params?.protocolVersion)}`
      : "never sent",
  };
}

const MODERN_OPENING = {
  firstRequest: "server/discover",
  discoverAnswer: `result, supportedVersions ["${MODERN}"]`,
  initialize: "never sent",
};

async function noneLeft(home: ClaudeHome): Promise<void> {
  await waitFor(() => taggedPids(home.tag).length === 0, {
    timeoutMs: 15_000,
    what: "every process Claude Code started for the server to be gone",
  });
}

describe("Claude Code over stdio", () => {
  test("the recording wrapper and the checks, on the 2026-only fixture peer: discover answered, no initialize", async () => {
    const home = new ClaudeHome();
    const transcript = await home.addRecorded("peer", [process.execPath, STDIO_PEER_2026]);
    expect(await home.status("peer")).toBe(CONNECTED);
    expect(opening(readTranscript(transcript))).toEqual(MODERN_OPENING);
    // The wrapper passed both directions through: the peer's tools reached Claude Code.
    const lines = readTranscript(transcript);
    const list = lines.find((entry) => entry.from === "client" && entry.message.method === "tools/list");
    const listed = lines.find((entry) => entry.from === "server" && entry.message.id === list?.message.id);
    const tools = (listed?.message.result as { tools?: unknown[] } | undefined)?.tools ?? [];
    expect(tools.length).toBeGreaterThan(0);
    await noneLeft(home);
  });

  test("repl-mcp: connected on server/discover at 2026-07-28, no initialize after it", async () => {
    const home = new ClaudeHome();
    const transcript = await home.addRecorded("repl", [BINARY]);
    const status = await home.status("repl");
    expect({ status, ...opening(readTranscript(transcript)) }).toEqual({
      status: CONNECTED,
      ...MODERN_OPENING,
    });
    await noneLeft(home);
  });
});

/**
 * A recording HTTP proxy in front of `target` (an MCP endpoint URL): every JSON-RPC message of a POST and of
 * its answer (JSON or SSE) is kept, in order, so HTTP transcripts read like the stdio ones.
 */
function recordingProxy(target: string): { url: string; exchanges: Exchange[] } {
  const exchanges: Exchange[] = [];
  const record = (from: string, text: string) => {
    const lines = text.includes("data:")
      ? text
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5))
      : [text];
    for (const line of lines) {
      try {
        const parsed = JSON.parse(line) as Message | Message[];
        for (const message of Array.isArray(parsed) ? parsed : [parsed]) exchanges.push({ from, message });
      } catch {
        // not JSON-RPC (an empty 202, a keep-alive): nothing to record
      }
    }
  };
  const origin = new URL(target).origin;
  const proxy = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch: async (request) => {
      const body = request.method === "POST" ? await request.text() : undefined;
      if (body !== undefined) record("client", body);
      const answer = await fetch(origin + new URL(request.url).pathname, {
        method: request.method,
        headers: request.headers,
        body,
      });
      const text = await answer.text();
      record("server", text);
      return new Response(text, { status: answer.status, headers: answer.headers });
    },
  });
  undo.push(() => proxy.stop(true));
  return { url: `http://127.0.0.1:${proxy.port}${new URL(target).pathname}`, exchanges };
}

describe("Claude Code over HTTP", () => {
  async function serve(): Promise<HttpServer> {
    const dir = tempDir("repl-mcp-claude-token-");
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, `${TOKEN}\n`);
    chmodSync(tokenFile, 0o600);
    const server = await HttpServer.start(["--auth-token-file", tokenFile]);
    undo.push(async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    return server;
  }

  async function addWithHeader(home: ClaudeHome, name: string, url: string): Promise<void> {
    await home.claude(
      "mcp",
      "add",
      "--transport",
      "http",
      name,
      url,
      "--header",
      `Authorization: Bearer ${TOKEN}`,
    );
  }

  test("the recording proxy and the checks, on the 2026-only HTTP fixture peer", async () => {
    const peer = await launchHttpPeer(HTTP_PEER_2026, {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      PEER_TOKEN: TOKEN,
    });
    undo.push(peer.stop);
    const proxy = recordingProxy(peer.url.href);
    const home = new ClaudeHome();
    await addWithHeader(home, "peer", proxy.url);
    expect(await home.status("peer")).toBe(CONNECTED);
    expect(opening(proxy.exchanges)).toEqual(MODERN_OPENING);
  });

  test("with the bearer header from `claude mcp add --header` it connects", async () => {
    const server = await serve();
    const home = new ClaudeHome();
    await addWithHeader(home, "repl", server.url);
    expect(await home.status("repl")).toBe(CONNECTED);
  });

  test("over HTTP too, server/discover at 2026-07-28 is answered with a result and no initialize follows", async () => {
    const server = await serve();
    const proxy = recordingProxy(server.url);
    const home = new ClaudeHome();
    await addWithHeader(home, "repl", proxy.url);
    const status = await home.status("repl");
    expect({ status, ...opening(proxy.exchanges) }).toEqual({ status: CONNECTED, ...MODERN_OPENING });
  });

  test("without the header it is not connected, and is told which header is missing rather than of a failed registration", async () => {
    const server = await serve();
    const home = new ClaudeHome();
    await home.claude("mcp", "add", "--transport", "http", "repl", server.url);
    const status = await home.status("repl");
    expect(status).toStartWith("✘ Failed to connect");
    expect(status).toContain("Authorization: Bearer");
    expect(status).not.toContain("Dynamic Client Registration rejected (HTTP 401)");
  });
});
