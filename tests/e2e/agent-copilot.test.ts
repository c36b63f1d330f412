// What GitHub Copilot CLI's model is shown of repl-mcp's results: the real client (offline, no GitHub
// account, isolated HOME) plays the shared SCRIPT against the binary, its model behind a fake OpenAI Chat
// Completions API on 127.0.0.1 (a BYOK provider whose model is declared vision-capable, as GitHub's catalog
// declares it for a signed-in user), and the assertions read the requests that model received. They hold
// whatever the result style is. A second, short run names the provider with the BYOK environment variables
// alone, where Copilot drops pictures. With REPL_MCP_AGENT_DUMP naming a directory, the test also writes
// copilot.md there: what the model saw, step by step, verbatim.
//
// Copilot CLI is not a devDependency yet: without node_modules/.bin/copilot (or REPL_MCP_COPILOT naming
// an install) the tests are skipped, saying so.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openingOf } from "../support/agents/client.ts";
import {
  COPILOT,
  COPILOT_MODEL,
  COPILOT_TOOL_PREFIX,
  type CopilotRun,
  runCopilot,
} from "../support/agents/copilot.ts";
import { modelViewTests } from "../support/agents/expectations.ts";
import { SCRIPT } from "../support/agents/script.ts";
import { taggedPids, waitFor } from "../support/harness.ts";

const MODERN = "2026-07-28";
const installed = existsSync(COPILOT);
if (!installed)
  console.warn(
    `agent-copilot: skipped, ${COPILOT} is missing (add the devDependency @github/copilot@1.0.102, or set REPL_MCP_COPILOT to its bin/copilot)`,
  );

const tag = crypto.randomUUID();
let run: CopilotRun;

beforeAll(async () => {
  if (!installed) return;
  run = await runCopilot({ tag });
  const dump = process.env.REPL_MCP_AGENT_DUMP;
  if (dump) {
    mkdirSync(dump, { recursive: true });
    writeFileSync(join(dump, "copilot.md"), report(run));
  }
}, 180_000);

afterAll(async () => {
  // runCopilot cleans up after itself; this is for a run that threw half-way.
  for (const pid of taggedPids(tag)) process.kill(pid, "SIGKILL");
  await waitFor(() => taggedPids(tag).length === 0, {
    timeoutMs: 10_000,
    what: "no process of the run left",
  });
});

describe.skipIf(!installed)("GitHub Copilot CLI plays the scripted session", () => {
  test("the scripted model reached its end, with Copilot exiting cleanly", () => {
    expect({ failure: run.failure, exitCode: run.exitCode }).toEqual({ failure: undefined, exitCode: 0 });
  });

  test("the model saw a result for every step of the script, in order", () => {
    expect([...run.seen.keys()]).toEqual(SCRIPT.map((step) => step.name));
  });

  test("offline: it reached for no host beyond the fake model and repl-mcp", () => {
    expect(run.outbound).toEqual([]);
  });

  test(`it connected over stdio with server/discover at ${MODERN}, answered, and sent no initialize`, () => {
    expect(openingOf(run.transcript)).toEqual({
      method: "server/discover",
      revision: MODERN,
      client: "copilot-cli",
      answered: [MODERN],
      initializes: 0,
    });
  });

  test("the model got the repl tools it needs, listed as deferred and loaded through tool_search_tool", () => {
    const names = run.tools.map((tool) => tool.name);
    for (const tool of ["execute_python", "python_start", "python_run", "python_health"])
      expect(names).toContain(COPILOT_TOOL_PREFIX + tool);
    const loaded = Array.isArray(run.searched)
      ? run.searched.map((part: { tool_name?: string }) => part.tool_name)
      : [];
    expect(loaded).toContain(`${COPILOT_TOOL_PREFIX}execute_python`);
  });

  test("the plot reaches the model as a PNG image, in the user message Copilot adds after the tool message", () => {
    const images = run.seen.get("plot")?.images ?? [];
    expect(images.map((image) => image.mimeType)).toEqual(["image/png"]);
    expect(images[0]?.bytes).toBeGreaterThan(1_000);
    const raw = run.seen.get("plot")?.raw;
    expect(Array.isArray(raw) ? raw.map((message) => message.role) : raw).toEqual(["tool", "user"]);
  });

  test("every model request went to the scripted model id, and each tool result came back as a tool message", () => {
    const models = new Set(run.requests.map((request: any) => request.model));
    expect([...models]).toEqual([COPILOT_MODEL]);
    const roles = [...run.seen.values()].map(
      (seen) => (Array.isArray(seen.raw) ? seen.raw[0] : seen.raw)?.role,
    );
    expect(new Set(roles)).toEqual(new Set(["tool"]));
  });
});

describe.skipIf(!installed)("what Copilot's model sees of repl-mcp (the text style)", () => {
  // Chat Completions has no error flag for a tool message: the text says it. Copilot prefixes a failed
  // call's text with the server's name, its own words.
  modelViewTests(() => run, { wrapper: /^MCP server 'repl': /, errorFlag: false, modern: true });
});

describe.skipIf(!installed)("GitHub Copilot CLI with only the BYOK environment variables", () => {
  let short: CopilotRun;
  const steps = SCRIPT.filter((step) => step.name === "health" || step.name === "plot");
  beforeAll(async () => {
    short = await runCopilot({ tag, provider: "env", script: steps });
  }, 120_000);

  test("sends the model no picture: COPILOT_PROVIDER_BASE_URL declares no vision, so the plot is dropped", () => {
    expect(short.failure).toBeUndefined();
    expect([...short.seen.keys()]).toEqual(steps.map((step) => step.name));
    expect(short.seen.get("plot")?.images).toEqual([]);
    // Copilot had the picture: its own event stream carries it among the results meant for the model.
    expect(short.answer).toContain('"binaryResultsForLlm":[{"type":"image"');
  });
});

/** A fence longer than any run of backticks in `text`, so the text stays verbatim inside it. */
function fenced(text: string, info = ""): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((match) => match[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${info}\n${text}\n${fence}`;
}

function report(run: CopilotRun): string {
  const lines = [
    "# GitHub Copilot CLI: what the model saw",
    "",
    'Copilot CLI offline (COPILOT_OFFLINE=true), a BYOK provider (COPILOT_PROVIDERS_CONFIG) of type "openai"',
    `with the "completions" wire API at a fake Chat Completions server, model \`${COPILOT_MODEL}\` declared`,
    "vision-capable. Chat Completions has no error flag for a tool message: error is undefined throughout,",
    "and only the text can say a call failed. A picture comes as a user message after the tool message;",
    "its text part is included in the step's text below. With only COPILOT_PROVIDER_BASE_URL and",
    "COPILOT_MODEL (no declared vision) Copilot sends no picture at all.",
    "",
  ];
  if (run.failure) lines.push("**The run failed:**", "", fenced(run.failure), "");
  for (const step of SCRIPT) {
    const seen = run.seen.get(step.name);
    lines.push(`## ${step.name} (\`${step.tool}\`)`, "");
    let args: string;
    try {
      args = JSON.stringify(step.args(run.seen));
    } catch (error) {
      args = `(could not be built: ${error instanceof Error ? error.message : String(error)})`;
    }
    lines.push(`- arguments: \`${args}\``);
    if (!seen) {
      lines.push("- never seen by the model", "");
      continue;
    }
    const images = seen.images.map((image) => `${image.mimeType} ${image.bytes} B`).join(", ");
    lines.push(
      `- error flag: ${seen.error}`,
      `- images: ${seen.images.length}${images ? ` (${images})` : ""}`,
      `- text: ${Buffer.byteLength(seen.text)} bytes`,
      "",
      fenced(seen.text),
      "",
    );
  }
  const first = run.transcript.find((entry) => entry.from === "client")?.message;
  const answer = run.transcript.find(
    (entry) => entry.from === "server" && entry.message?.id === first?.id,
  )?.message;
  lines.push(
    "## Opening of the stdio transcript",
    "",
    "The client's first request:",
    "",
    fenced(JSON.stringify(first, null, 2), "json"),
    "",
    "The server's answer:",
    "",
    fenced(JSON.stringify(answer, null, 2), "json"),
    "",
    "## The tool search",
    "",
    "What Copilot answered the model's `tool_search_tool` call with:",
    "",
    fenced(JSON.stringify(run.searched, null, 2), "json"),
    "",
    "## The repl tools as the model got them",
    "",
  );
  for (const tool of run.tools) lines.push(`### ${tool.name}`, "", fenced(tool.description), "");
  return lines.join("\n");
}
