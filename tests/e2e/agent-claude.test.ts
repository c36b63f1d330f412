// What Claude Code's model is shown of repl-mcp's results: the real client (the devDependency, offline,
// isolated HOME) plays the shared SCRIPT against the binary with a scripted model behind a fake Anthropic
// API on 127.0.0.1, and the assertions read the requests that model received. They hold whatever the
// result style is; the style's own expectations live with the style. With REPL_MCP_AGENT_DUMP set to a
// directory, the test also writes claude.md there: what the model saw, step by step, verbatim.
// runner: waiting lane
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLAUDE_TOOL_PREFIX, type ClaudeRun, runClaude } from "../support/agents/claude.ts";
import { openingOf } from "../support/agents/client.ts";
import { modelViewTests } from "../support/agents/expectations.ts";
import { SCRIPT } from "../support/agents/script.ts";
import { taggedPids, waitFor } from "../support/harness.ts";

const MODERN = "2026-07-28";
const tag = crypto.randomUUID();
let run: ClaudeRun;

beforeAll(async () => {
  run = await runClaude({ tag });
  const dump = process.env.REPL_MCP_AGENT_DUMP;
  if (dump) {
    mkdirSync(dump, { recursive: true });
    writeFileSync(join(dump, "claude.md"), report(run));
  }
}, 180_000);

afterAll(async () => {
  // runClaude cleans up after itself; this is for a run that threw half-way.
  for (const pid of taggedPids(tag)) process.kill(pid, "SIGKILL");
  await waitFor(() => taggedPids(tag).length === 0, {
    timeoutMs: 10_000,
    what: "no process of the run left",
  });
});

describe("what Claude Code's model sees of repl-mcp (the text style)", () => {
  // Claude Code names a picture's saved copy in a text line of its own: not counted against our budgets.
  modelViewTests(() => run, { wrapper: /\[Image: source: [^\]]*\]\n?/g, errorFlag: true, modern: true });
});

describe("Claude Code plays the scripted session", () => {
  test("the scripted model reached its end, with Claude Code exiting cleanly", () => {
    expect({ failure: run.failure, exitCode: run.exitCode }).toEqual({ failure: undefined, exitCode: 0 });
  });

  test("the model saw a result for every step of the script, in order", () => {
    expect([...run.seen.keys()]).toEqual(SCRIPT.map((step) => step.name));
  });

  test("it asked the fake API only for what a Messages API serves", () => {
    expect(run.unknownPaths).toEqual([]);
  });

  test(`it connected over stdio with server/discover at ${MODERN}, answered, and sent no initialize`, () => {
    expect(openingOf(run.transcript)).toEqual({
      method: "server/discover",
      revision: MODERN,
      client: "claude-code",
      answered: [MODERN],
      initializes: 0,
    });
  });

  test("the model got the repl tools it needs, loaded through ToolSearch", () => {
    const names = run.tools.map((tool) => tool.name);
    for (const tool of ["execute_python", "python_start", "python_run", "python_health"])
      expect(names).toContain(CLAUDE_TOOL_PREFIX + tool);
  });

  test("failures reach the model as failures (is_error), successes not", () => {
    const flags = Object.fromEntries([...run.seen].map(([name, seen]) => [name, seen.error]));
    delete flags["no-session"];
    expect(flags).toEqual(
      Object.fromEntries(
        SCRIPT.filter((step) => step.name !== "no-session").map((step) => [
          step.name,
          step.name === "zero" || step.name === "printed-then-raised",
        ]),
      ),
    );
  });

  test("the plot reaches the model as a PNG image block", () => {
    const images = run.seen.get("plot")?.images ?? [];
    expect(images.map((image) => image.mimeType)).toEqual(["image/png"]);
    expect(images[0]?.bytes).toBeGreaterThan(1_000);
  });
});

/** A fence longer than any run of backticks in `text`, so the text stays verbatim inside it. */
function fenced(text: string, info = ""): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((match) => match[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${info}\n${text}\n${fence}`;
}

function report(run: ClaudeRun): string {
  const lines = ["# Claude Code: what the model saw", ""];
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
      `- is_error: ${seen.error}`,
      `- images: ${seen.images.length}${images ? ` (${images})` : ""}`,
      `- text: ${Buffer.byteLength(seen.text)} bytes`,
      "",
      fenced(seen.text),
      "",
    );
  }
  const messages = run.transcript;
  const first = messages.find((entry) => entry.from === "client")?.message;
  const answer = messages.find(
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
    "## The repl tools as the model got them",
    "",
  );
  for (const tool of run.tools) lines.push(`### ${tool.name}`, "", fenced(tool.description), "");
  return lines.join("\n");
}
