// A real client: Claude Code (the devDependency, offline, in an isolated HOME with no account) runs
// `claude mcp list`, which connects to every configured server and prints its status. Over stdio the server
// runs behind tests/support/record-stdio.ts, so the test sees every line either side sent: Claude Code opens
// with `server/discover` at 2026-07-28 and falls back to `initialize` only when that is refused. The 2026-only
// fixture peer shows what a 2026 server's transcript looks like, with the same wrapper and the same checks.
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, taggedPids, tempDir, waitFor } from "../support/harness.ts";
import { HttpServer } from "../support/http.ts";
import { run } from "../support/run.ts";

const CLAUDE = join(import.meta.dir, "../../node_modules/.bin/claude");
const RECORD = join(import.meta.dir, "../support/record-stdio.ts");
const STDIO_PEER_2026 = join(import.meta.dir, "../fixtures/peers/stdio-peer-2026.ts");
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
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: this.home,
      XDG_CONFIG_HOME: join(this.home, ".config"),
      XDG_CACHE_HOME: join(this.home, ".cache"),
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
      RECORD,
      transcript,
      "--",
      ...command,
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

interface Recorded {
  from: "client" | "server";
  line: string;
}

type Message = { id?: unknown; method?: string; params?: Record<string, unknown> } & Record<string, unknown>;

function transcriptOf(file: string): { from: string; message: Message }[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Recorded)
    .map(({ from, line }) => ({ from, message: JSON.parse(line) as Message }));
}

/**
 * What the transcript says about the opening, in words a failed comparison shows as they are: the first
 * request, how server/discover was answered, and whether initialize was sent.
 */
function opening(file: string) {
  const lines = transcriptOf(file);
  const sent = lines.filter((entry) => entry.from === "client").map((entry) => entry.message);
  const discover = sent.find((message) => message.method === "server/discover");
  const answer = lines.find(
    (entry) => entry.from === "server" && discover !== undefined && entry.message.id === discover.id,
  )?.message;
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
    expect(opening(transcript)).toEqual(MODERN_OPENING);
    // The wrapper passed both directions through: the peer's tools reached Claude Code.
    const lines = transcriptOf(transcript);
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
    expect({ status, ...opening(transcript) }).toEqual({ status: CONNECTED, ...MODERN_OPENING });
    await noneLeft(home);
  });
});

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

  test("with the bearer header from `claude mcp add --header` it connects", async () => {
    const server = await serve();
    const home = new ClaudeHome();
    await home.claude(
      "mcp",
      "add",
      "--transport",
      "http",
      "repl",
      server.url,
      "--header",
      `Authorization: Bearer ${TOKEN}`,
    );
    expect(await home.status("repl")).toBe(CONNECTED);
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
