// The real Gemini CLI (the devDependency) playing SCRIPT against the repl-mcp binary: its model API is the
// fake on loopback (GOOGLE_GEMINI_BASE_URL), its HOME is a temp directory whose ~/.gemini/settings.json
// picks API-key auth, turns telemetry, usage statistics and update checks off and configures the server as
// `repl`, launched behind tests/support/record-stdio.ts so every stdio line either side sent is kept.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, taggedPids, tempDir, waitFor } from "../harness.ts";
import { run } from "../run.ts";
import { type AgentRun, isolatedEnv, readTranscript, recorded } from "./client.ts";
import { MARKER, startFakeGemini } from "./fake-gemini.ts";
import { SCRIPT, type Step, SYSTEM_PYTHON } from "./script.ts";

const GEMINI = join(import.meta.dir, "../../../node_modules/.bin/gemini");
/** The whole scripted session; it sleeps about 12 s, the rest is the client's and the server's start. */
const RUN_DEADLINE_MS = 150_000;

/** Tools are named mcp_<server>_<tool>. */
export interface GeminiRun extends AgentRun {
  /** The arguments the model called each step with. */
  calls: Map<string, Record<string, unknown>>;
  /** The request paths in order (model and method), matching `requests`. */
  paths: string[];
  /** Problems the fake model met (an unexpected route, an args function that threw). */
  problems: string[];
  /** The models the agent's own turns were sent to (the CLI routes `auto` itself). */
  models: string[];
  /** Processes of the run still alive a while after the client exited (killed then); none is expected. */
  leftovers: number;
}

export interface RunOptions {
  serverArgs?: string[];
  env?: Record<string, string>;
  /** `gemini -m …`; without it the CLI picks its default (`auto`). */
  model?: string;
}

/** The scripted session against repl-mcp (the binary under test, with Debian's python3). */
export function runGemini(options: RunOptions = {}): Promise<GeminiRun> {
  return runGeminiOn({
    ...options,
    script: SCRIPT,
    server: "repl",
    command: [BINARY, "--python", SYSTEM_PYTHON, ...(options.serverArgs ?? [])],
  });
}

export interface Session extends Omit<RunOptions, "serverArgs"> {
  script: Step[];
  /** The name the server is configured under (its tools reach the model as mcp_<server>_<tool>). */
  server: string;
  command: string[];
}

/** Any script against any stdio MCP server, configured under `server`. */
export async function runGeminiOn(options: Session): Promise<GeminiRun> {
  const dir = tempDir("repl-mcp-gemini-");
  const home = join(dir, "home");
  const project = join(dir, "project");
  const transcriptFile = join(dir, "transcript.jsonl");
  const tag = crypto.randomUUID();
  mkdirSync(join(home, ".gemini"), { recursive: true });
  mkdirSync(project);
  const fake = startFakeGemini(options.script, options.server);
  let leftovers = 0;
  try {
    const settings = {
      security: { auth: { selectedType: "gemini-api-key" } },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      mcpServers: {
        [options.server]: {
          command: process.execPath,
          args: recorded(transcriptFile, options.command),
          env: { REPL_MCP_TEST_TAG: tag, ...options.env },
        },
      },
    };
    writeFileSync(join(home, ".gemini", "settings.json"), JSON.stringify(settings, null, 2));
    const prompt = `${MARKER}: run the scripted steps with the ${options.server} tools.`;
    const args = [
      GEMINI,
      "-p",
      prompt,
      "--output-format",
      "stream-json",
      "--approval-mode",
      "yolo",
      "--skip-trust",
    ];
    if (options.model) args.push("-m", options.model);
    const result = await run(args, {
      cwd: project,
      timeoutMs: RUN_DEADLINE_MS,
      env: isolatedEnv(home, {
        GOOGLE_GEMINI_BASE_URL: fake.url,
        GEMINI_API_KEY: "fake-key-for-loopback",
        GEMINI_CLI_NO_RELAUNCH: "true",
        GEMINI_TELEMETRY_ENABLED: "false",
        NO_COLOR: "1",
        REPL_MCP_TEST_TAG: tag,
      }),
    });
    if (result.code !== 0 || !fake.finished) {
      const tail = (result.stdout + result.stderr).slice(-4_000);
      throw new Error(
        `gemini exited ${result.code} (script finished: ${fake.finished}; problems: ${fake.problems.join("; ") || "none"}):\n${tail}`,
      );
    }
    // The client ends its servers as it exits; give them a moment to go on their own before counting.
    await waitFor(() => taggedPids(tag).length === 0, { timeoutMs: 10_000 }).catch(() => {
      leftovers = taggedPids(tag).length;
    });
    return {
      seen: fake.seen,
      calls: fake.calls,
      tools: fake.tools,
      answer: result.stdout,
      transcript: readTranscript(transcriptFile),
      requests: fake.recorded.map((entry) => entry.body),
      paths: fake.recorded.map((entry) => entry.path),
      problems: fake.problems,
      models: [...fake.models],
      leftovers,
    };
  } finally {
    fake.stop();
    // A run that failed half-way may leave the client, the server or its workers behind.
    for (const pid of taggedPids(tag)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
    await waitFor(() => taggedPids(tag).length === 0, {
      timeoutMs: 15_000,
      what: "every process of the Gemini run to be gone",
    });
    rmSync(dir, { recursive: true, force: true });
  }
}
