// Codex CLI (the pinned devDependency, a Rust binary in the npm package) driven end to end: `codex exec`
// in a CODEX_HOME of its own whose model provider is the fake Responses API on 127.0.0.1 and whose one MCP
// server is repl-mcp behind the recording stdio wrapper. No account, no network, analytics and feedback off.
// What comes back is what the scripted model was shown for each step, the tools as it got them, and every
// line either side of the stdio connection sent.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, taggedPids, tempDir, waitFor } from "../harness.ts";
import { homeEnv } from "../home.ts";
import { type AgentRun, isolatedEnv, readTranscript, recorded } from "./client.ts";
import { FakeOpenAI, type ModelTool, type RecordedRequest } from "./fake-openai.ts";
import { SCRIPT, type Step, SYSTEM_PYTHON } from "./script.ts";

const CODEX = join(import.meta.dir, "../../../node_modules/.bin/codex");
/** The MCP server's name in config.toml: Codex calls its tools mcp__repl.<tool>. */
export const SERVER_NAME = "repl";
/** A slug Codex ships model metadata for: with it Codex defers MCP tools behind tool_search, as in real use. */
export const MODEL = "gpt-5.5";
const KEY_VARIABLE = "REPL_MCP_FAKE_OPENAI_KEY";
/** The prompt's own words: a request whose conversation lacks them is a side request, not the session. */
export const PROMPT = "repl-mcp scripted session: use the repl tools as the model tells you.";
const RUN_DEADLINE_MS = 120_000;

/** Tools are the functions of the namespace mcp__repl; `answer` is `codex exec --json` (one event a line). */
export interface CodexRun extends AgentRun {
  tools: ModelTool[];
  /** The description Codex gave the tools' namespace (it passes the server's instructions there). */
  namespaceDescription: string | undefined;
  /** Step name -> the arguments the scripted model called the tool with. */
  args: Map<string, Record<string, unknown>>;
  /** Every request the fake received, with what it answered. */
  recorded: RecordedRequest[];
  /** Codex's stderr. */
  stderr: string;
  /** Why the scripted model stopped early, if it did. */
  failure: string | undefined;
}

export interface CodexOptions {
  /** Arguments after `--python SYSTEM_PYTHON`. */
  serverArgs?: string[];
  /** Variables for repl-mcp (Codex passes only a few of its own to MCP servers, so they go into config.toml). */
  env?: Record<string, string>;
  /** The REPL_MCP_TEST_TAG the server's processes carry (default: a fresh one), for taggedPids. */
  tag?: string;
}

/** TOML basic strings are JSON strings for everything we write (paths, ids, plain words). */
const toml = (value: string) => JSON.stringify(value);
const tomlTable = (entries: Record<string, string>) =>
  `{ ${Object.entries(entries)
    .map(([key, value]) => `${key} = ${toml(value)}`)
    .join(", ")} }`;

/** A `key = "value"` line, or nothing when the value is null (Codex's own default then applies). */
const setting = (key: string, value: string | null) => (value === null ? [] : [`${key} = ${toml(value)}`]);

/**
 * How Codex lets the model's calls through. `codex exec` never asks (approval_policy "never"), so under the
 * workspace-write or read-only sandbox Codex refuses an MCP tool its annotations call destructive (execute_python)
 * unless the server's tools are approved up front; danger-full-access would let them through too, but it also
 * unsandboxes Codex's own shell commands. MCP servers themselves run outside Codex's sandbox either way.
 */
export interface CodexPermissions {
  /** Top-level approval_policy (default "never"; null: leave it out). */
  approvalPolicy?: string | null;
  /** Top-level sandbox_mode (default "workspace-write"; null: leave it out). */
  sandboxMode?: string | null;
  /** The server's default_tools_approval_mode (default "approve"; null: leave it out). */
  toolsApproval?: string | null;
}

function configToml(
  options: {
    baseUrl: string;
    serverName: string;
    command: string[];
    serverEnv: Record<string, string>;
    model: string;
  } & Required<CodexPermissions>,
): string {
  const [command = "", ...args] = options.command;
  return [
    `model = ${toml(options.model)}`,
    `model_provider = "fake"`,
    ...setting("approval_policy", options.approvalPolicy),
    ...setting("sandbox_mode", options.sandboxMode),
    `check_for_update_on_startup = false`,
    "",
    "[analytics]",
    "enabled = false",
    "",
    "[feedback]",
    "enabled = false",
    "",
    "[history]",
    `persistence = "none"`,
    "",
    "[model_providers.fake]",
    `name = "fake OpenAI Responses API"`,
    `base_url = ${toml(options.baseUrl)}`,
    `env_key = ${toml(KEY_VARIABLE)}`,
    `wire_api = "responses"`,
    "request_max_retries = 0",
    "stream_max_retries = 0",
    "",
    `[mcp_servers.${options.serverName}]`,
    `command = ${toml(command)}`,
    `args = [${args.map(toml).join(", ")}]`,
    `env = ${tomlTable(options.serverEnv)}`,
    ...setting("default_tools_approval_mode", options.toolsApproval),
    "",
  ].join("\n");
}

/** Runs the scripted session through `codex exec` against repl-mcp and returns what the model saw. */
export function runCodex(options: CodexOptions = {}): Promise<CodexRun> {
  return runCodexSession({
    script: SCRIPT,
    server: [BINARY, "--python", SYSTEM_PYTHON, ...(options.serverArgs ?? [])],
    env: options.env,
    tag: options.tag,
  });
}

export interface CodexSession extends CodexPermissions {
  script: Step[];
  /** The MCP server's command line (run behind the recording wrapper). */
  server: string[];
  /** Its name in config.toml (default: repl); Codex's namespace for its tools is mcp__<name>. */
  serverName?: string;
  /**
   * The model slug (default MODEL). A slug Codex has no metadata for gets the MCP tools up front, as a
   * namespace in the request's tools, with no tool_search, and a warning event on stdout.
   */
  model?: string;
  /** What the fake model asks tool_search for (default: "python"). */
  searchQuery?: string;
  env?: Record<string, string>;
  tag?: string;
}

/** Runs any script through `codex exec` against any stdio MCP server; cleans up after itself. */
export async function runCodexSession(session: CodexSession): Promise<CodexRun> {
  const tag = session.tag ?? crypto.randomUUID();
  const serverName = session.serverName ?? SERVER_NAME;
  const dir = tempDir("repl-mcp-codex-");
  const home = join(dir, "home");
  const codexHome = join(dir, "codex-home");
  const project = join(dir, "project");
  for (const path of [home, codexHome, project]) mkdirSync(path);
  const transcriptFile = join(dir, "transcript.jsonl");
  const fake = new FakeOpenAI({
    script: session.script,
    server: serverName,
    marker: PROMPT,
    searchQuery: session.searchQuery,
  });
  try {
    writeFileSync(
      join(codexHome, "config.toml"),
      configToml({
        baseUrl: fake.baseUrl,
        serverName,
        command: [process.execPath, ...recorded(transcriptFile, session.server)],
        model: session.model ?? MODEL,
        approvalPolicy: session.approvalPolicy === undefined ? "never" : session.approvalPolicy,
        sandboxMode: session.sandboxMode === undefined ? "workspace-write" : session.sandboxMode,
        toolsApproval: session.toolsApproval === undefined ? "approve" : session.toolsApproval,
        serverEnv: {
          ...homeEnv(home),
          ...session.env,
          REPL_MCP_TEST_TAG: tag,
        },
      }),
    );
    const proc = Bun.spawn(
      [CODEX, "exec", "--json", "--skip-git-repo-check", "--ephemeral", "--strict-config", PROMPT],
      {
        cwd: project,
        env: isolatedEnv(home, {
          CODEX_HOME: codexHome,
          [KEY_VARIABLE]: "dummy-key-for-the-fake",
          RUST_LOG: "error",
        }),
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const timer = setTimeout(() => proc.kill("SIGKILL"), RUN_DEADLINE_MS);
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]).finally(() => clearTimeout(timer));
    if (code !== 0)
      throw new Error(`codex exec exited ${code ?? proc.signalCode}:\n${stderr}\n${stdout.slice(-4000)}`);
    // Codex closes the server's stdin on exit; the wrapper leaves once the server is gone.
    await waitFor(() => taggedPids(tag).length === 0, {
      timeoutMs: 15_000,
      what: "repl-mcp and its workers to exit after codex exec",
    });
    return {
      seen: new Map(fake.seen),
      args: new Map(fake.asked),
      tools: fake.tools,
      namespaceDescription: fake.namespaceDescription,
      answer: stdout,
      transcript: readTranscript(transcriptFile),
      requests: fake.requests.map((request) => request.body),
      recorded: fake.requests,
      stderr,
      failure: fake.failure,
    };
  } finally {
    for (const pid of taggedPids(tag)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    fake.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
