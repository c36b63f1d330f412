// Claude Code (the devDependency) playing SCRIPT against the repl-mcp binary: `claude -p` in an isolated
// HOME with no account, its model API at the scripted fake on 127.0.0.1, the server behind the recording
// stdio wrapper. What comes back is what the model was shown (from the requests the fake received) and
// every line the client and the server exchanged.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, taggedPids, tempDir, waitFor } from "../harness.ts";
import { type AgentRun, isolatedEnv, readTranscript, recorded } from "./client.ts";
import { FakeAnthropic } from "./fake-anthropic.ts";
import { SCRIPT, type Step, SYSTEM_PYTHON } from "./script.ts";

const CLAUDE = join(import.meta.dir, "../../../node_modules/.bin/claude");
/** Claude Code names a server's tools mcp__<server>__<tool>; the server is configured as "repl". */
export const CLAUDE_TOOL_PREFIX = "mcp__repl__";
/** Claude Code 2.1.x keeps MCP tools deferred until the model loads them with this tool. */
export const CLAUDE_SEARCH_TOOL = "ToolSearch";
/** The whole session sleeps ~12 s; this is the deadline for Claude Code to finish it. */
const RUN_TIMEOUT_MS = 120_000;

/** Tools are named mcp__repl__<tool>; `requests` holds every POST (turns, side requests, token counts). */
export interface ClaudeRun extends AgentRun {
  /** Paths the client asked the fake API for that it does not serve (e.g. "GET /v1/models"). */
  unknownPaths: string[];
  /** Why the scripted model stopped early, if it did. */
  failure?: string;
  /** Claude Code's exit status and stderr. */
  exitCode: number | null;
  stderr: string;
}

export interface RunOptions {
  /** The steps the model plays (default: SCRIPT). */
  script?: Step[];
  serverArgs?: string[];
  /** Put in the server's environment (through the MCP config's `env`). */
  env?: Record<string, string>;
  /**
   * Put in the environment of Claude Code and everything it starts, so a test can find leftovers with
   * taggedPids(tag) even when the run throws; a fresh one when absent.
   */
  tag?: string;
  /** Put in Claude Code's own environment (over the isolating defaults; "" removes a default). */
  clientEnv?: Record<string, string>;
  /** Claude Code settings (hooks, ...), given with --settings. */
  settings?: object;
}

export async function runClaude(options: RunOptions = {}): Promise<ClaudeRun> {
  const tag = options.tag ?? crypto.randomUUID();
  const dir = tempDir("repl-mcp-agent-claude-");
  const home = join(dir, "home");
  const project = join(dir, "project");
  const transcriptFile = join(dir, "transcript.jsonl");
  const configFile = join(dir, "mcp.json");
  mkdirSync(home);
  mkdirSync(project);
  writeFileSync(
    configFile,
    JSON.stringify({
      mcpServers: {
        repl: {
          type: "stdio",
          command: process.execPath,
          args: recorded(transcriptFile, [BINARY, "--python", SYSTEM_PYTHON, ...(options.serverArgs ?? [])]),
          env: { REPL_MCP_TEST_TAG: tag, ...options.env },
        },
      },
    }),
  );
  const fake = new FakeAnthropic({
    script: options.script ?? SCRIPT,
    toolPrefix: CLAUDE_TOOL_PREFIX,
    searchTool: CLAUDE_SEARCH_TOOL,
  });
  try {
    const proc = Bun.spawn(
      [
        CLAUDE,
        "-p",
        "Work through the scripted Python session with the repl tools.",
        "--mcp-config",
        configFile,
        "--strict-mcp-config",
        "--allowedTools",
        `${CLAUDE_TOOL_PREFIX}*`,
        "--output-format",
        "stream-json",
        "--verbose",
        ...(options.settings ? ["--settings", JSON.stringify(options.settings)] : []),
      ],
      {
        cwd: project,
        env: isolatedEnv(home, {
          ANTHROPIC_BASE_URL: fake.url,
          // Any key will do: the fake never checks it, and with one Claude Code needs no login.
          ANTHROPIC_API_KEY: "sk-ant-fake-key-for-the-scripted-model",
          DISABLE_TELEMETRY: "1",
          DISABLE_AUTOUPDATER: "1",
          DISABLE_ERROR_REPORTING: "1",
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
          REPL_MCP_TEST_TAG: tag,
          ...options.clientEnv,
        }),
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const timer = setTimeout(() => proc.kill("SIGKILL"), RUN_TIMEOUT_MS);
    const [answer, stderr, exitCode] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]).finally(() => clearTimeout(timer));
    if (proc.signalCode === "SIGKILL")
      throw new Error(`claude -p did not finish within ${RUN_TIMEOUT_MS} ms; stderr:\n${stderr}`);

    // The model's tools as of its last turn (after ToolSearch loaded the deferred ones).
    const last = fake.turns.at(-1);
    const tools = ((last?.tools ?? []) as Record<string, any>[])
      .filter((tool) => String(tool.name).startsWith(CLAUDE_TOOL_PREFIX))
      .map((tool) => ({ name: tool.name, description: tool.description ?? "", schema: tool.input_schema }));
    return {
      seen: new Map(fake.seen),
      tools,
      answer,
      transcript: readTranscript(transcriptFile),
      requests: fake.requests.filter((entry) => entry.method === "POST").map((entry) => entry.body),
      unknownPaths: fake.unknownPaths,
      failure: fake.failure,
      exitCode,
      stderr,
    };
  } finally {
    fake.stop();
    // Claude Code closes the server's stdin when it exits; whatever is still up after that is killed.
    await waitFor(() => taggedPids(tag).length === 0, {
      timeoutMs: 10_000,
      what: "the server to exit",
    }).catch(() => {
      for (const pid of taggedPids(tag)) process.kill(pid, "SIGKILL");
    });
    rmSync(dir, { recursive: true, force: true });
  }
}
