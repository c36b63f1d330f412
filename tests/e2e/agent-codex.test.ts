// A real agent client: Codex CLI 0.169.0 plays the scripted session (tests/support/agents/script.ts) against
// the binary, its model API a scripted fake on 127.0.0.1. The assertions read what Codex put in front of the
// model and what it sent repl-mcp over stdio; they hold whatever result style the server picks for Codex.
// With REPL_MCP_AGENT_DUMP naming a directory, the test writes codex.md there: every step as the model saw it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LONG_TEXT_CHARS, PICTURE, SHAPES } from "../fixtures/peers/result-shapes.ts";
import { type CodexRun, MODEL, runCodex, runCodexSession, SERVER_NAME } from "../support/agents/codex.ts";
import { modelViewTests } from "../support/agents/expectations.ts";
import { FINAL_ANSWER } from "../support/agents/fake-openai.ts";
import { SCRIPT, type Step, SYSTEM_PYTHON } from "../support/agents/script.ts";
import { BINARY, taggedPids, waitFor } from "../support/harness.ts";

const RESULT_SHAPES = join(import.meta.dir, "../fixtures/peers/result-shapes.ts");
/** One step per fixed result shape: the fake model calls each tool of the fixture once. */
const SHAPE_SCRIPT: Step[] = Object.keys(SHAPES).map((name) => ({ name, tool: name, args: () => ({}) }));

/** Under Codex's own defaults for exec: a tool annotated read-only, one annotated destructive, another read-only. */
const DEFAULTS_SCRIPT: Step[] = [
  { name: "health", tool: "python_health", args: () => ({}) },
  { name: "cell", tool: "execute_python", args: () => ({ code: "1+1" }) },
  { name: "poll", tool: "python_run", args: () => ({}) },
];
const REFUSED = "MCP tool call requires approval, but approval policy is never";

const tag = crypto.randomUUID();
let run: CodexRun;
let shapes: CodexRun;
let defaults: CodexRun;

beforeAll(async () => {
  run = await runCodex({ tag });
  shapes = await runCodexSession({
    script: SHAPE_SCRIPT,
    server: [process.execPath, RESULT_SHAPES],
    serverName: "shapes",
    // BM25 over the fixture's names and descriptions: words that between them reach every tool.
    searchQuery:
      "content structured structuredContent error image resource link long text empty declared block",
    tag,
  });
  defaults = await runCodexSession({
    script: DEFAULTS_SCRIPT,
    server: [BINARY, "--python", SYSTEM_PYTHON],
    approvalPolicy: null,
    sandboxMode: null,
    toolsApproval: null,
    tag,
  });
  const dump = process.env.REPL_MCP_AGENT_DUMP;
  if (dump) {
    mkdirSync(dump, { recursive: true });
    writeFileSync(join(dump, "codex.md"), dumpOf(run, shapes, defaults));
  }
}, 300_000);

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
    // The namespace's description, which the model reads with the tools, is the server's instructions.
    const [initialize] = clientRequests();
    expect(run.namespaceDescription).toBe(answerTo(initialize?.id)?.result?.instructions);
    expect(run.namespaceDescription ?? "").not.toBe("");
  });

  test("Codex puts its own wall-time header before every tool result the model reads", () => {
    for (const step of SCRIPT)
      expect(run.seen.get(step.name)?.text ?? "").toMatch(/^Wall time: \d+(\.\d+)? seconds\nOutput:\n/);
  });
});

describe("what Codex's model sees of repl-mcp (the text style)", () => {
  // The wall-time header is Codex's own; Codex's Responses items carry no error flag, so the text says it.
  modelViewTests(() => run, {
    wrapper: /^Wall time: \d+(\.\d+)? seconds\nOutput:\n/,
    errorFlag: false,
    modern: false,
  });
});

const WALL_TIME = /^Wall time: \d+(\.\d+)? seconds\nOutput:/;

/** What the model saw for a shape, without Codex's wall-time header, and how the output was sent. */
function shown(name: string) {
  const seen = shapes.seen.get(name);
  const output = (seen?.raw as any)?.output;
  return {
    text: (seen?.text ?? "").replace(WALL_TIME, "").replace(/^\n/, ""),
    images: seen?.images ?? [],
    sent: Array.isArray(output) ? "content items" : typeof output,
  };
}

describe("how Codex presents each shape of tool result to its model (the result-shapes fixture)", () => {
  test("the fixture session ran: every shape was called and seen", () => {
    expect({ failure: shapes.failure, steps: [...shapes.seen.keys()] }).toEqual({
      failure: undefined,
      steps: SHAPE_SCRIPT.map((step) => step.name),
    });
  });

  test("with structuredContent present the model gets only its JSON: the content blocks, images too, are dropped", () => {
    const structured = { text: '{"words":"words in structuredContent"}', images: [], sent: "string" };
    // With or without a declared outputSchema.
    expect(shown("structured_image")).toEqual(structured);
    expect(shown("declared_structured")).toEqual(structured);
  });

  test("without structuredContent the model gets the content: text blocks one a line, an image as an input_image", () => {
    expect(shown("content_text")).toEqual({
      text: "plain words in content",
      images: [],
      sent: "content items",
    });
    expect(shown("content_two_texts").text).toBe("first block\nsecond block");
    expect(shown("content_image")).toEqual({
      text: "a picture follows",
      images: [{ mimeType: "image/png", bytes: PICTURE.length }],
      sent: "content items",
    });
    // A declared outputSchema without structuredContent is not refused: the content is shown.
    expect(shown("declared_without_structured").text).toBe("content without the declared structure");
    expect(shown("empty_content").text).toBe("");
  });

  test("isError leaves no mark: the model reads the same text as for a success", () => {
    expect(shown("error_content")).toEqual({
      text: "ValueError: it failed",
      images: [],
      sent: "content items",
    });
    expect(shown("error_structured").text).toBe('{"words":"error words in structuredContent"}');
    for (const name of ["error_content", "error_structured"]) {
      expect(shapes.seen.get(name)?.error).toBeUndefined();
      // The item has no field to carry a failure: the same four as a success's.
      expect(Object.keys(shapes.seen.get(name)?.raw ?? {}).sort()).toEqual([
        "call_id",
        "id",
        "output",
        "type",
      ]);
    }
  });

  test("resource links and embedded resources reach the model as their JSON", () => {
    const lines = shown("resource_link").text.split("\n");
    expect(lines[0]).toBe("a link follows");
    expect(JSON.parse(lines[1] ?? "null")).toMatchObject({ type: "resource_link", name: "report.csv" });
    expect(JSON.parse(lines[2] ?? "null")).toMatchObject({
      type: "resource",
      resource: { text: "embedded words" },
    });
  });

  test("a long text is cut in the middle: Codex keeps its head and tail around a truncation mark", () => {
    const { text } = shown("long_text");
    expect(text.length).toBeLessThan(LONG_TEXT_CHARS / 2);
    expect(text).toStartWith("line 000000 ");
    expect(text).toMatch(/…\d+ tokens truncated…/);
  });
});

/** What repl-mcp answered the tools/call Codex made for the model's call `callId`, in one line. */
function answered(run: CodexRun, callId: unknown): string {
  const call = run.transcript.find(
    (entry) =>
      entry.from === "client" &&
      entry.message.method === "tools/call" &&
      entry.message.params?._meta?.callId === callId,
  );
  const result = run.transcript.find(
    (entry) => entry.from === "server" && entry.message.id === call?.message.id && !entry.message.method,
  )?.message.result;
  if (!result) return "no answer found in the transcript";
  const blocks = ((result.content ?? []) as any[]).map((block) => {
    if (block.type === "text") return `text ${Buffer.byteLength(block.text)} B`;
    if (block.type === "image")
      return `image ${block.mimeType} ${Buffer.from(block.data, "base64").length} B`;
    return block.type;
  });
  const structured = result.structuredContent
    ? `structuredContent ${Buffer.byteLength(JSON.stringify(result.structuredContent))} B`
    : "no structuredContent";
  return `isError ${result.isError === true}, content [${blocks.join(", ")}], ${structured}`;
}

/** Per tool, the JSON Schema keywords of its listed inputSchema that the schema the model got lacks. */
function droppedKeywords(run: CodexRun): string[] {
  const list = run.transcript.find(
    (entry) => entry.from === "client" && entry.message.method === "tools/list",
  );
  const listed = (run.transcript.find(
    (entry) => entry.from === "server" && entry.message.id === list?.message.id,
  )?.message.result?.tools ?? []) as { name: string; inputSchema: unknown }[];
  const keywords = (schema: unknown, path: string, into: Set<string>) => {
    if (!schema || typeof schema !== "object") return into;
    for (const [key, value] of Object.entries(schema)) {
      if (key === "properties" && value && typeof value === "object")
        for (const [name, inner] of Object.entries(value)) keywords(inner, `${path}.${name}`, into);
      else {
        into.add(`${path}:${key}`);
        if (key === "items") keywords(value, `${path}[]`, into);
      }
    }
    return into;
  };
  const lines: string[] = [];
  for (const tool of listed) {
    const got = run.tools.find((candidate) => candidate.name === tool.name);
    const kept = keywords(got?.schema, "", new Set());
    const lost = [...keywords(tool.inputSchema, "", new Set())].filter((key) => !kept.has(key));
    if (lost.length > 0) lines.push(`${tool.name}: ${lost.join(", ")}`);
  }
  return lines;
}

describe("Codex's own defaults for exec (read-only sandbox, no approvals, no default_tools_approval_mode)", () => {
  test("a tool annotated read-only runs; execute_python, annotated destructive, is refused before it reaches the server", () => {
    const text = (name: string) =>
      defaults.seen.get(name)?.text.replace(WALL_TIME, "").replace(/^\n/, "") ?? "";
    expect(text("health")).toStartWith("repl-mcp ");
    expect(text("cell")).toBe(REFUSED);
    expect(text("poll")).not.toBe(REFUSED);
    const called = defaults.transcript
      .filter((entry) => entry.from === "client" && entry.message.method === "tools/call")
      .map((entry) => entry.message.params.name);
    expect(called).toEqual(["python_health", "python_run"]);
  });
});

/** A Markdown fence that no run of backticks inside `text` can close. */
function fenced(text: string, info = ""): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((match) => match[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${info}\n${text}\n${fence}`;
}

function dumpOf(run: CodexRun, shapes: CodexRun, defaults: CodexRun): string {
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
    out.push(`- repl-mcp answered: ${answered(run, (seen.raw as any)?.call_id)}`);
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
  out.push(
    "Codex passes each description through unchanged but rewrites the input schemas (it sorts the",
    "properties and drops keywords); outputSchema and annotations do not reach the model. Keywords in",
    "repl-mcp's tools/list that the model's schemas lack:",
    "",
    fenced(droppedKeywords(run).join("\n") || "(none)"),
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
  out.push(
    "## How Codex presents each shape of result (tests/fixtures/peers/result-shapes.ts)",
    "",
    "Long texts are cut to their first and last 300 characters here (the test checks the whole).",
    "",
  );
  for (const step of SHAPE_SCRIPT) {
    const seen = shapes.seen.get(step.name);
    const output = (seen?.raw as any)?.output;
    const text = seen?.text ?? "(not seen)";
    const images = (seen?.images ?? []).map((image) => `${image.mimeType} ${image.bytes} B`).join(", ");
    out.push(
      `### ${step.name}: ${SHAPES[step.name]?.description}`,
      "",
      `- sent as: ${Array.isArray(output) ? `content items (${output.map((part: any) => part.type).join(", ")})` : typeof output}`,
      `- images: ${seen?.images.length ?? 0}${images ? ` (${images})` : ""}; text: ${Buffer.byteLength(text)} bytes`,
      "",
      fenced(text.length > 1_000 ? `${text.slice(0, 300)}\n[...]\n${text.slice(-300)}` : text),
      "",
    );
  }
  out.push(
    "## Under Codex's own exec defaults (no approval_policy, sandbox_mode or default_tools_approval_mode)",
    "",
    'The steps above ran with `sandbox_mode = "workspace-write"`, `approval_policy = "never"` and',
    '`default_tools_approval_mode = "approve"` on the server. Without them:',
    "",
  );
  for (const step of DEFAULTS_SCRIPT)
    out.push(
      `### ${step.name} (\`${step.tool}\`)`,
      "",
      fenced(defaults.seen.get(step.name)?.text ?? "(not seen)"),
      "",
    );
  return `${out.join("\n")}\n`;
}
