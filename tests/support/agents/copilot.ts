// GitHub Copilot CLI (`@github/copilot`), driven end to end by the scripted model: `copilot -p` in an
// isolated HOME, offline (COPILOT_OFFLINE=true: no GitHub login, telemetry, update or GitHub MCP server),
// its model API pointed at the fake Chat Completions server (Copilot's "openai" provider type with the
// "completions" wire API), and repl-mcp configured in ~/.copilot/mcp-config.json behind the stdio recorder.
// Copilot names an MCP tool `<server>-<tool>` to its model and, for a Claude model, lists MCP tools as
// deferred behind its `tool_search_tool`, which the scripted model calls first.
//
// Two ways to name the provider, and they differ in what the model gets:
// - "catalog" (the default): a providers file (COPILOT_PROVIDERS_CONFIG, Copilot's multi-provider BYOK
//   surface) that declares the model's capabilities, vision included, as the model catalog a signed-in
//   user gets from GitHub does. Pictures then reach the model, in a user message after the tool message.
// - "env": only the documented BYOK variables (COPILOT_PROVIDER_BASE_URL, COPILOT_MODEL). Copilot then
//   knows nothing of the model's vision and sends no picture at all, though its own event stream has it.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, taggedPids, tempDir, waitFor } from "../harness.ts";
import { type AgentRun, isolatedEnv, readTranscript, recorded } from "./client.ts";
import { FakeChatCompletions } from "./fake-chat-completions.ts";
import { SCRIPT, type Step, SYSTEM_PYTHON } from "./script.ts";

/** The pinned devDependency; REPL_MCP_COPILOT names another install of the same CLI. */
export const COPILOT =
  process.env.REPL_MCP_COPILOT ?? join(import.meta.dir, "../../../node_modules/.bin/copilot");
const SERVER = "repl";
export const COPILOT_TOOL_PREFIX = `${SERVER}-`;
/**
 * A model id of the catalog Copilot ships (the first `model` value `copilot help config` lists), so the
 * client configures its agent for it as for a real user.
 */
export const COPILOT_MODEL = "claude-sonnet-5.5";
const SEARCH_TOOL = "tool_search_tool";
/** The provider's name in the providers file; Copilot selects its models as `<provider>/<id>`. */
const PROVIDER = "scripted";
const RUN_DEADLINE_MS = 120_000;

/** Tools carry Copilot's prefix (`repl-execute_python`); `answer` is its JSONL event stream. */
export interface CopilotRun extends AgentRun {
  /**
   * What Copilot answered the model's tool search with (undefined when it offered none): a list of
   * `{type: "tool_reference", tool_name}` parts, one per tool it loaded.
   */
  searched: unknown;
  /** Why the run did not end as it should (the exit, the fake's complaints, stderr); undefined when it did. */
  failure: string | undefined;
  exitCode: number | null;
  /**
   * The opening line of every connection Copilot made through its proxy (HTTP(S)_PROXY points at a trap
   * on 127.0.0.1; NO_PROXY exempts only loopback): a host it tried to reach beyond the fake and repl-mcp.
   */
  outbound: string[];
}

const PROMPT =
  "Use the repl tools: check python_health, then run the cells you are given, one tool call at a time.";

/**
 * The providers file: the fake as an OpenAI-compatible provider, and the model with the capabilities
 * Copilot's catalog gives a vision model (the shape of ModelCapabilities in the bundled copilot-sdk's
 * types.d.ts); the image limits are generous, not the catalog's.
 */
function providersFile(file: string, baseUrl: string): string {
  const capabilities = {
    supports: { vision: true },
    limits: {
      max_context_window_tokens: 200_000,
      vision: {
        supported_media_types: ["image/png", "image/jpeg", "image/gif", "image/webp"],
        max_prompt_images: 20,
        max_prompt_image_size: 5_000_000,
      },
    },
  };
  const config = {
    providers: [{ name: PROVIDER, type: "openai", wireApi: "completions", baseUrl }],
    models: [{ id: COPILOT_MODEL, provider: PROVIDER, capabilities }],
  };
  writeFileSync(file, `${JSON.stringify(config, null, 2)}\n`);
  return file;
}

/** A TCP listener that records the first line a client sends and hangs up: where traffic would go. */
function trapProxy(): { url: string; lines: string[]; stop(): void } {
  const lines: string[] = [];
  const listener = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(socket, data) {
        lines.push(data.toString("latin1").split("\r\n")[0] ?? "");
        socket.end();
      },
    },
  });
  return { url: `http://127.0.0.1:${listener.port}`, lines, stop: () => listener.stop(true) };
}

/**
 * Runs the whole scripted session through Copilot CLI and returns what its model saw, also when the run
 * went wrong (then `failure` says how). Everything it started (the fake, the client, repl-mcp and its
 * workers, all carrying `tag`) is gone and its directory removed when it returns.
 */
export async function runCopilot(
  options: {
    serverArgs?: string[];
    env?: Record<string, string>;
    /** Carried by every process of the run (REPL_MCP_TEST_TAG), so a caller can find leftovers. */
    tag?: string;
    /** How Copilot is told of the model (see the top of this file). */
    provider?: "catalog" | "env";
    /** The steps to play (default: the whole SCRIPT). */
    script?: Step[];
  } = {},
): Promise<CopilotRun> {
  const dir = tempDir("repl-mcp-copilot-");
  const home = join(dir, "home");
  const project = join(dir, "project");
  const transcript = join(dir, "transcript.jsonl");
  const tag = options.tag ?? crypto.randomUUID();
  mkdirSync(join(home, ".copilot"), { recursive: true });
  mkdirSync(project);
  const script = options.script ?? SCRIPT;
  const fake = new FakeChatCompletions({
    script,
    toolName: (tool) => COPILOT_TOOL_PREFIX + tool,
    search: { tool: SEARCH_TOOL, args: { pattern: `^${COPILOT_TOOL_PREFIX}`, limit: 20 } },
  });
  const trap = trapProxy();
  let client: ReturnType<typeof Bun.spawn> | undefined;
  try {
    // The user's configuration, as `copilot mcp add repl -- repl-mcp …` writes it.
    const config = {
      mcpServers: {
        [SERVER]: {
          type: "local",
          command: process.execPath,
          args: recorded(transcript, [BINARY, "--python", SYSTEM_PYTHON, ...(options.serverArgs ?? [])]),
          tools: ["*"],
          env: { REPL_MCP_TEST_TAG: tag, ...options.env },
        },
      },
    };
    writeFileSync(join(home, ".copilot", "mcp-config.json"), `${JSON.stringify(config, null, 2)}\n`);
    client = Bun.spawn(
      [
        COPILOT,
        "-p",
        PROMPT,
        "--allow-all-tools",
        "--output-format",
        "json",
        "--disable-client-telemetry",
        "--no-auto-update",
        "--no-custom-instructions",
        "--no-ask-user",
        "--disable-builtin-mcps",
      ],
      {
        cwd: project,
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
        env: isolatedEnv(home, {
          XDG_STATE_HOME: join(home, ".local", "state"),
          // The native launcher unpacks its JavaScript here on its first start (~235 MB, ~2 s).
          COPILOT_PKG_CACHE_HOME: join(dir, "pkg"),
          COPILOT_OFFLINE: "true",
          COPILOT_AUTO_UPDATE: "false",
          ...(options.provider === "env"
            ? { COPILOT_PROVIDER_BASE_URL: fake.baseUrl, COPILOT_MODEL }
            : {
                COPILOT_PROVIDERS_CONFIG: providersFile(join(dir, "providers.json"), fake.baseUrl),
                COPILOT_MODEL: `${PROVIDER}/${COPILOT_MODEL}`,
              }),
          NO_COLOR: "1",
          HTTP_PROXY: trap.url,
          HTTPS_PROXY: trap.url,
          http_proxy: trap.url,
          https_proxy: trap.url,
          NO_PROXY: "127.0.0.1,localhost",
          no_proxy: "127.0.0.1,localhost",
        }),
      },
    );
    const spawned = client;
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      spawned.kill("SIGKILL");
    }, RUN_DEADLINE_MS);
    const [stdout, stderr, exitCode] = await Promise.all([
      new Response(spawned.stdout as ReadableStream).text(),
      new Response(spawned.stderr as ReadableStream).text(),
      spawned.exited,
    ]).finally(() => clearTimeout(timer));
    const problems = [...fake.problems];
    if (late) problems.push(`copilot did not finish within ${RUN_DEADLINE_MS} ms`);
    if (exitCode !== 0) problems.push(`copilot exited ${exitCode} (signal ${spawned.signalCode ?? "none"})`);
    const missing = script.filter((step) => !fake.seen.has(step.name)).map((step) => step.name);
    if (missing.length > 0) problems.push(`the model never saw a result for ${missing.join(", ")}`);
    return {
      seen: new Map(fake.seen),
      tools: fake.tools
        .filter((tool) => tool.function?.name?.startsWith(COPILOT_TOOL_PREFIX))
        .map((tool) => ({
          name: tool.function?.name ?? "",
          description: tool.function?.description ?? "",
          schema: tool.function?.parameters,
        })),
      answer: stdout,
      transcript: readTranscript(transcript),
      requests: [...fake.requests],
      searched: fake.searched,
      failure:
        problems.length === 0
          ? undefined
          : `${problems.join("; ")}\nstderr: ${stderr.slice(-4000)}\nstdout (end): ${stdout.slice(-4000)}`,
      exitCode,
      outbound: [...trap.lines],
    };
  } finally {
    if (client && client.exitCode === null && client.signalCode === null) client.kill("SIGKILL");
    await client?.exited;
    fake.stop();
    trap.stop();
    // Copilot stops its MCP servers when it exits; whatever a failed run left behind is killed here.
    await waitFor(() => taggedPids(tag).length === 0, { timeoutMs: 10_000, what: "repl-mcp to exit" }).catch(
      () => {
        for (const pid of taggedPids(tag)) process.kill(pid, "SIGKILL");
      },
    );
    rmSync(dir, { recursive: true, force: true });
  }
}
