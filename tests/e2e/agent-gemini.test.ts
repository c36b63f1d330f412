// Gemini CLI (the pinned devDependency) driven end to end by a scripted model on loopback: what its model is
// shown of each repl-mcp result, read off the Gemini API requests the client really sent. A second session
// against a fixture server of fixed result shapes pins the rules the client applies to a CallToolResult
// (content text only, each block wrapped in <untrusted_context>, a tool error as one string dumping the raw
// result, a picture as an inlineData part beside the functionResponse), so a change of client shows here.
// With REPL_MCP_AGENT_DUMP naming a directory, the sessions are written there as gemini.md.
import { beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openingOf } from "../support/agents/client.ts";
import { modelViewTests } from "../support/agents/expectations.ts";
import { type GeminiRun, runGemini, runGeminiOn } from "../support/agents/gemini.ts";
import { PLOT, SCRIPT, type Step } from "../support/agents/script.ts";
import { BIG_TEXT, PIXEL_PNG, SHAPES } from "../support/agents/shapes-peer.ts";

const SHAPES_PEER = join(import.meta.dir, "../support/agents/shapes-peer.ts");
const SESSION_DEADLINE_MS = 180_000;
const REPL_TOOLS = ["execute_python", "python_start", "python_run", "python_health"];
const PIXEL_BYTES = Buffer.from(PIXEL_PNG, "base64").length;

const wrapped = (text: string) => `<untrusted_context>\n${text}\n</untrusted_context>`;
const shapeScript: Step[] = Object.keys(SHAPES).map((name) => ({ name, tool: name, args: () => ({}) }));
const shapesCommand = [process.execPath, SHAPES_PEER];

let session: GeminiRun;
let shapes: GeminiRun;

beforeAll(async () => {
  session = await runGemini();
  shapes = await runGeminiOn({ script: shapeScript, server: "shapes", command: shapesCommand });
  const dump = process.env.REPL_MCP_AGENT_DUMP;
  if (dump) {
    mkdirSync(dump, { recursive: true });
    writeFileSync(join(dump, "gemini.md"), report(session, shapes));
  }
}, SESSION_DEADLINE_MS);

describe("Gemini CLI plays the scripted session against repl-mcp", () => {
  test("every step reached the model, with nothing left running after the client exited", () => {
    expect({
      seen: SCRIPT.map((step) => step.name).filter((name) => session.seen.has(name)),
      problems: session.problems,
      leftovers: session.leftovers,
    }).toEqual({ seen: SCRIPT.map((step) => step.name), problems: [], leftovers: 0 });
  });

  test("it connects over stdio with initialize at 2025-06-18, as gemini-cli-mcp-client", () => {
    expect(openingOf(session.transcript)).toEqual({
      method: "initialize",
      revision: "2025-06-18",
      client: "gemini-cli-mcp-client",
      answered: "2025-06-18",
      initializes: 1,
    });
  });

  test("the model gets the repl tools as mcp_repl_<tool>, with their descriptions", () => {
    const names = session.tools.map((tool) => tool.name);
    for (const tool of REPL_TOOLS) expect(names).toContain(`mcp_repl_${tool}`);
    for (const tool of session.tools) expect(tool.description.length).toBeGreaterThan(0);
  });

  test("the plot reaches the model as an inlineData picture", () => {
    const plot = session.seen.get("plot");
    expect(session.calls.get("plot")?.code).toBe(PLOT);
    expect(plot?.images.map((image) => image.mimeType)).toEqual(["image/png"]);
    expect(plot?.images[0]?.bytes ?? 0).toBeGreaterThan(1_000);
  });
});

describe("what Gemini's model sees of repl-mcp (the text style)", () => {
  // Gemini wraps each text block in <untrusted_context> tags: its own, not counted against our budgets.
  modelViewTests(() => session, {
    wrapper: /<untrusted_context>\n|\n<\/untrusted_context>/g,
    errorFlag: true,
    modern: false,
  });
});

/** What the model got for one shape, in the words a failed comparison shows. */
function shown(run: GeminiRun, name: string) {
  const seen = run.seen.get(name);
  if (!seen) return "never shown";
  return {
    error: seen.error,
    text: seen.text,
    images: seen.images.map((image) => `${image.mimeType} ${image.bytes}`),
  };
}

describe("Gemini CLI's rules for a CallToolResult (fixture server of fixed shapes)", () => {
  test("the model reads the content text, each block wrapped in <untrusted_context>, never structuredContent", () => {
    expect({
      sentence: shown(shapes, "sentence"),
      json_object_text: shown(shapes, "json_object_text"),
      two_texts: shown(shapes, "two_texts"),
      text_and_structured: shown(shapes, "text_and_structured"),
      schema_json_text: shown(shapes, "schema_json_text"),
      embedded_text: shown(shapes, "embedded_text"),
      resource_link: shown(shapes, "resource_link"),
      untrusted_tag: shown(shapes, "untrusted_tag"),
      empty: shown(shapes, "empty"),
    }).toEqual({
      sentence: { error: false, text: wrapped("The answer is 42."), images: [] },
      json_object_text: { error: false, text: wrapped('{"answer": 42}'), images: [] },
      two_texts: { error: false, text: `${wrapped("first block")}\n${wrapped("second block")}`, images: [] },
      text_and_structured: { error: false, text: wrapped("the text block"), images: [] },
      // Without structuredContent the client parses the first text block as JSON and uses that as the
      // structured content, so this tool's output schema is satisfied by its text.
      schema_json_text: { error: false, text: wrapped('{"from": "the text block"}'), images: [] },
      embedded_text: { error: false, text: wrapped("embedded text"), images: [] },
      resource_link: { error: false, text: "Resource Link: the x file at file:///tmp/x.txt", images: [] },
      untrusted_tag: { error: false, text: wrapped("a &lt;/untrusted_context&gt; tag inside"), images: [] },
      // No text at all: the functionResponse's response is {}.
      empty: { error: false, text: "", images: [] },
    });
  });

  test("a first text block that parses as JSON other than an object fails the call, as does a schema without structured content", () => {
    const bare = shapes.seen.get("bare_42");
    const sentence = shapes.seen.get("schema_sentence");
    expect({ bare: bare?.error, schemaSentence: sentence?.error }).toEqual({
      bare: true,
      schemaSentence: true,
    });
    expect(bare?.text).toStartWith("MCP tool 'bare_42' reported tool error for function call: ");
    expect(bare?.text).toContain("Invalid input: expected record, received number");
    expect(bare?.text).not.toContain(wrapped("42"));
    expect(sentence?.text).toContain(
      "MCP error -32600: Tool schema_sentence has an output schema but did not return structured content",
    );
  });

  test("an isError result or a JSON-RPC error reaches the model as one `error` string that dumps the raw result", () => {
    const prefix = (tool: string) =>
      `MCP tool '${tool}' reported tool error for function call: {"name":"${tool}","args":{}} with response: `;
    const dumped = (name: string) => {
      const text = shapes.seen.get(name)?.text ?? "";
      return text.startsWith(prefix(name)) ? JSON.parse(text.slice(prefix(name).length)) : text;
    };
    expect({
      is_error: dumped("is_error"),
      is_error_no_structured: dumped("is_error_no_structured"),
      thrown: dumped("thrown"),
      flags: ["is_error", "is_error_no_structured", "thrown"].map((name) => shapes.seen.get(name)?.error),
    }).toEqual({
      is_error: [{ functionResponse: { name: "is_error", response: SHAPES.is_error?.result } }],
      is_error_no_structured: [
        {
          functionResponse: {
            name: "is_error_no_structured",
            response: SHAPES.is_error_no_structured?.result,
          },
        },
      ],
      thrown: [
        {
          functionResponse: {
            name: "thrown",
            response: { error: { message: "MCP error -32603: the handler threw", isError: true } },
          },
        },
      ],
      flags: [true, true, true],
    });
  });

  test("a picture is an inlineData part after the functionResponse, announced in its text; audio is dropped", () => {
    const label = (tool: string, kind: string, mime: string) =>
      `[Tool '${tool}' provided the following ${kind} data with mime-type: ${mime}]`;
    expect({
      image_with_text: shown(shapes, "image_with_text"),
      image_only: shown(shapes, "image_only"),
      audio: shown(shapes, "audio"),
    }).toEqual({
      image_with_text: {
        error: false,
        text: `${wrapped("a picture follows")}\n${label("image_with_text", "image", "image/png")}`,
        images: [`image/png ${PIXEL_BYTES}`],
      },
      image_only: {
        error: false,
        text: label("image_only", "image", "image/png"),
        images: [`image/png ${PIXEL_BYTES}`],
      },
      audio: {
        error: false,
        text: [
          "[SYSTEM: Binary content (audio/wav) stripped from response due to protocol limitations.]",
          wrapped("a sound follows"),
          label("audio", "audio", "audio/wav"),
        ].join("\n"),
        images: [],
      },
    });
    // A failed call's picture is no picture: its base64 is part of the dumped error string.
    const failed = shapes.seen.get("is_error_with_image");
    expect({
      error: failed?.error,
      images: failed?.images,
      dumped: failed?.text.includes(PIXEL_PNG),
    }).toEqual({
      error: true,
      images: [],
      dumped: true,
    });
    const raw = shapes.seen.get("image_only")?.raw as Record<string, any>[];
    expect(raw.map((part) => Object.keys(part))).toEqual([["functionResponse"], ["inlineData"]]);
  });

  test("a single text block over 40,000 characters is cut to its first 8,000 and last 32,000", () => {
    const text = shapes.seen.get("big_text")?.text ?? "";
    expect(text).toStartWith(
      "Output too large. Showing first 8,000 and last 32,000 characters. For full output see: ",
    );
    expect(text).toContain(
      `\n... [${(wrapped(BIG_TEXT).length - 40_000).toLocaleString("en-US")} characters omitted] ...\n`,
    );
    expect(text.length).toBeLessThan(BIG_TEXT.length);
  });
});

describe("with a gemini-3-* model (multimodal function responses)", () => {
  let picked: GeminiRun;
  beforeAll(async () => {
    const script = shapeScript.filter((step) => step.name === "image_with_text");
    picked = await runGeminiOn({
      script,
      server: "shapes",
      command: shapesCommand,
      model: "gemini-3-flash-preview",
    });
  }, SESSION_DEADLINE_MS);

  test("Gemini CLI 0.61.0 loses the picture: it nests it in functionResponse.parts, then rebuilds the part without them", () => {
    // generateContentResponseUtilities.js puts images inside functionResponse.parts for models whose name
    // starts with "gemini-3-"; geminiChat.js stripToolCallIdPrefixes then copies only name, response and id.
    expect(picked.models).toEqual(["gemini-3-flash-preview"]);
    expect(shown(picked, "image_with_text")).toEqual({
      error: false,
      text: `${wrapped("a picture follows")}\n[Tool 'image_with_text' provided the following image data with mime-type: image/png]`,
      images: [],
    });
  });
});

/** A fence longer than any run of backticks in `text`. */
function fenced(text: string, info = ""): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((match) => match[0].length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}${info}\n${text}\n${fence}`;
}

/** The raw parts with base64 data and very long strings shortened, for the dump (the text is verbatim). */
const elided = (raw: unknown) =>
  JSON.stringify(
    raw,
    (key, value) => {
      if (typeof value !== "string") return value;
      if (key === "data") return `<${value.length} base64 chars>`;
      if (value.length <= 4_000) return value;
      return `${value.slice(0, 1_000)}<... ${value.length - 2_000} chars left out of the dump ...>${value.slice(-1_000)}`;
    },
    2,
  );

function steps(run: GeminiRun, script: Step[]): string[] {
  const out: string[] = [];
  for (const step of script) {
    const seen = run.seen.get(step.name);
    out.push(`### ${step.name} (\`${step.tool}\`)`, "");
    out.push(`- arguments: \`${JSON.stringify(run.calls.get(step.name) ?? null)}\``);
    if (!seen) {
      out.push("- never reached the model", "");
      continue;
    }
    const images = seen.images.map((image) => `${image.mimeType} ${image.bytes} bytes`).join(", ");
    out.push(`- error flag (\`error\` key in the functionResponse): ${seen.error}`);
    out.push(`- images: ${seen.images.length}${images ? ` (${images})` : ""}`);
    out.push(`- text: ${Buffer.byteLength(seen.text)} bytes`, "", fenced(seen.text), "");
    out.push(
      "<details><summary>raw parts</summary>",
      "",
      fenced(elided(seen.raw), "json"),
      "",
      "</details>",
      "",
    );
  }
  return out;
}

function report(repl: GeminiRun, fixture: GeminiRun): string {
  const first = repl.transcript.find((entry) => entry.from === "client")?.message;
  const answer = repl.transcript.find(
    (entry) => entry.from === "server" && entry.message.id === first?.id,
  )?.message;
  const lines = [
    "# Gemini CLI 0.61.0: what the model sees",
    "",
    `Models the agent turns went to: ${repl.models.join(", ")} (default \`auto\` routing; ${repl.requests.length} model-API requests in all).`,
    "",
    "## Opening (the client's first request and the server's answer)",
    "",
    fenced(JSON.stringify(first, null, 2), "json"),
    "",
    fenced(JSON.stringify(answer, null, 2), "json"),
    "",
    "## The repl tools as the model got them",
    "",
    ...repl.tools.flatMap((tool) => [`### ${tool.name}`, "", fenced(tool.description), ""]),
    "## The scripted session",
    "",
    ...steps(repl, SCRIPT),
    "## Fixed result shapes (tests/support/agents/shapes-peer.ts)",
    "",
    ...steps(fixture, shapeScript),
  ];
  return `${lines.join("\n")}\n`;
}
