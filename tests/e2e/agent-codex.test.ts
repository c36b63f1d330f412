// A real agent client: Codex CLI 0.169.0 plays the scripted session (tests/support/agents/script.ts) against
// the binary, its model API a scripted fake on 127.0.0.1. The assertions read what Codex put in front of the
// model and what it sent repl-mcp over stdio; they hold whatever result style the server picks for Codex.
// With REPL_MCP_AGENT_DUMP naming a directory, the test writes codex.md there: every step as the model saw it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CodexRun, MODEL, runCodex, SERVER_NAME } from "../support/agents/codex.ts";
import { FINAL_ANSWER } from "../support/agents/fake-openai.ts";
import { SCRIPT } from "../support/agents/script.ts";
import { taggedPids, waitFor } from "../support/harness.ts";

const tag = crypto.randomUUID();
let run: CodexRun;

beforeAll(async () => {
  run = await runCodex({ tag });
  const dump = process.env.REPL_MCP_AGENT_DUMP;
  if (dump) {
    mkdirSync(dump, { recursive: true });
    writeFileSync(join(dump, "codex.md"), dumpOf(run));
  }
}, 180_000);

afterAll(async () => {
  // runCodex cleans up after itself; a run that failed half-way must not leave a server behind either.
  for (const pid of taggedPids(tag)) process.kill(pid, "SIGKILL");
  await waitFor(() => taggedPids(tag).length === 0, { timeoutMs: 10_000, what: "no tagged process left" });
});

const clientRequests = () => run.transcript.filter((entry) => entry.from === "client").map((e) => e.message);

/** The server's answer to the client's request with this id. */
const answerTo = (id: unknown) =>
  run.transcript.find((entry) => entry.from === "server" && entry.message.id === id && !entry.message.method)
    ?.message;

describe(`Codex CLI (${MODEL}) through the scripted session`, () => {
  test("the model saw every step of the script, in order, and the session ended with its final answer", () => {
    expect({ failure: run.failure, steps: [...run.seen.keys()] }).toEqual({
      failure: undefined,
      steps: SCRIPT.map((step) => step.name),
    });
    const final = run.answer
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line))
      .filter((event) => event.type === "item.completed" && event.item?.type === "agent_message");
    expect(final.at(-1)?.item.text).toBe(FINAL_ANSWER);
  });

  test("it connects over stdio with initialize at 2025-06-18 as codex-mcp-client 0.169.0, and the server agrees", () => {
    const [first] = clientRequests();
    expect({
      method: first?.method,
      protocolVersion: first?.params?.protocolVersion,
      clientInfo: first?.params?.clientInfo,
      answeredWith: answerTo(first?.id)?.result?.protocolVersion,
    }).toEqual({
      method: "initialize",
      protocolVersion: "2025-06-18",
      clientInfo: { name: "codex-mcp-client", title: "Codex", version: "0.169.0" },
      answeredWith: "2025-06-18",
    });
  });

  test("each step is one tools/call of the step's tool, answered", () => {
    const calls = clientRequests().filter((message) => message.method === "tools/call");
    expect(calls.map((call) => call.params.name)).toEqual(SCRIPT.map((step) => step.tool));
    for (const call of calls) expect(answerTo(call.id)?.result).toBeDefined();
  });

  test("the MCP tools are deferred behind tool_search, which hands them over as the namespace mcp__repl", () => {
    const namespace = `mcp__${SERVER_NAME}`;
    // The first model request offers tool_search and none of the repl tools; the model's first move is the search.
    const first = run.recorded.find((request) => request.answer !== "side");
    const offered = ((first?.body as any)?.tools ?? []) as { type: string; name?: string }[];
    expect({
      answer: first?.answer,
      toolSearch: offered.some((tool) => tool.type === "tool_search"),
      replOffered: offered.some((tool) => tool.name === namespace || tool.name?.startsWith(`${namespace}__`)),
    }).toEqual({ answer: "tool_search", toolSearch: true, replOffered: false });
    const names = run.tools.map((tool) => tool.name);
    for (const name of ["execute_python", "python_start", "python_run", "python_health"])
      expect(names).toContain(name);
    expect(new Set(run.tools.map((tool) => tool.namespace))).toEqual(new Set([namespace]));
  });

  test("Codex puts its own wall-time header before every tool result the model reads", () => {
    for (const step of SCRIPT)
      expect(run.seen.get(step.name)?.text ?? "").toMatch(/^Wall time: \d+(\.\d+)? seconds\nOutput:\n/);
  });
});

/** A Markdown fence that no run of backticks inside `text` can close. */
function fenced(text: string, info = ""): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((match) => match[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${info}\n${text}\n${fence}`;
}

function dumpOf(run: CodexRun): string {
  const out: string[] = [];
  const requests = run.transcript.filter((entry) => entry.from === "client").map((entry) => entry.message);
  const first = requests[0];
  const answer = run.transcript.find((entry) => entry.from === "server" && entry.message.id === first?.id);
  out.push(
    "# What Codex CLI 0.169.0 shows its model",
    "",
    `Model slug \`${MODEL}\` (Codex ships metadata for it, so MCP tools are deferred behind \`tool_search\`).`,
    `Model requests: ${run.recorded.length} (${run.recorded.map((request) => request.answer).join(", ")}).`,
    "Codex's function_call_output has no error flag: `error` is always undefined for this client.",
    "",
    "## Steps",
    "",
  );
  for (const step of SCRIPT) {
    const seen = run.seen.get(step.name);
    out.push(`### ${step.name} (\`${step.tool}\`)`, "");
    out.push(fenced(JSON.stringify(run.args.get(step.name) ?? null, null, 2), "json"), "");
    if (!seen) {
      out.push("Not seen by the model.", "");
      continue;
    }
    const images = seen.images.map((image) => `${image.mimeType} ${image.bytes} B`).join(", ");
    const parts = (seen.raw as any)?.output;
    out.push(
      `- error flag: ${String(seen.error)}`,
      `- images: ${seen.images.length}${images ? ` (${images})` : ""}`,
      `- text: ${Buffer.byteLength(seen.text)} bytes`,
      `- output as sent: ${Array.isArray(parts) ? `${parts.length} content items` : typeof parts}`,
      "",
      fenced(seen.text),
      "",
    );
  }
  out.push(
    "## The opening of the stdio transcript",
    "",
    "The client's first request:",
    "",
    fenced(JSON.stringify(first ?? null, null, 2), "json"),
    "",
    "The server's answer:",
    "",
    fenced(JSON.stringify(answer?.message ?? null, null, 2), "json"),
    "",
    `Client requests and notifications, in order: ${requests.map((message) => message.method ?? "(response)").join(", ")}.`,
    "",
    "The first tools/call as Codex sends it:",
    "",
    fenced(
      JSON.stringify(requests.find((message) => message.method === "tools/call") ?? null, null, 2),
      "json",
    ),
    "",
    "## The repl tools as the model got them",
    "",
    `From \`tool_search\`, as functions of the namespace \`mcp__${SERVER_NAME}\`, whose description is:`,
    "",
    fenced(run.namespaceDescription ?? "(none)"),
    "",
  );
  for (const tool of run.tools) {
    out.push(
      `### ${tool.namespace ? `${tool.namespace}.` : ""}${tool.name}`,
      "",
      fenced(tool.description),
      "",
    );
    out.push(fenced(JSON.stringify(tool.schema ?? null, null, 2), "json"), "");
  }
  return `${out.join("\n")}\n`;
}
