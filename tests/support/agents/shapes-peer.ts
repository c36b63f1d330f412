// A stdio MCP server whose every tool returns one fixed CallToolResult shape (a bare `42`, a sentence, two
// text blocks, an error, a picture, structuredContent beside text, an output schema with no structured
// content, …), so a real client's recorded model requests show the rule it applies to each shape, not only
// to the shapes repl-mcp happens to send today. Run it with bun: `bun tests/support/agents/shapes-peer.ts`.
import type { CallToolResult, Tool } from "@modelcontextprotocol/server";
import { Server } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";

/** A 1×1 PNG (67 bytes once decoded). */
export const PIXEL_PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
/** Longer than Gemini CLI's default truncateToolOutputThreshold (40,000 characters). */
export const BIG_TEXT = "0123456789".repeat(5_000);

const OBJECT_SCHEMA = { type: "object" as const, properties: {} };
const text = (value: string) => ({ type: "text" as const, text: value });

interface Shape {
  result: CallToolResult;
  outputSchema?: Tool["outputSchema"];
  /** Throw from the handler instead (the client gets a JSON-RPC error, not a result). */
  thrown?: string;
}

export const SHAPES: Record<string, Shape> = {
  bare_42: { result: { content: [text("42")] } },
  sentence: { result: { content: [text("The answer is 42.")] } },
  json_object_text: { result: { content: [text('{"answer": 42}')] } },
  two_texts: { result: { content: [text("first block"), text("second block")] } },
  text_and_structured: {
    result: { content: [text("the text block")], structuredContent: { only: "in structuredContent" } },
    outputSchema: { type: "object", properties: { only: { type: "string" } } },
  },
  schema_sentence: {
    result: { content: [text("A sentence from a tool with an output schema.")] },
    outputSchema: OBJECT_SCHEMA,
  },
  schema_json_text: {
    result: { content: [text('{"from": "the text block"}')] },
    outputSchema: OBJECT_SCHEMA,
  },
  is_error: {
    result: {
      content: [text("it broke"), text("second error block")],
      structuredContent: { code: "BROKEN" },
      isError: true,
    },
  },
  is_error_with_image: {
    result: {
      content: [text("it broke after drawing"), { type: "image", data: PIXEL_PNG, mimeType: "image/png" }],
      isError: true,
    },
  },
  is_error_no_structured: { result: { content: [text("it broke, plainly")], isError: true } },
  thrown: { result: { content: [] }, thrown: "the handler threw" },
  image_with_text: {
    result: {
      content: [text("a picture follows"), { type: "image", data: PIXEL_PNG, mimeType: "image/png" }],
    },
  },
  image_only: { result: { content: [{ type: "image", data: PIXEL_PNG, mimeType: "image/png" }] } },
  audio: {
    result: { content: [text("a sound follows"), { type: "audio", data: PIXEL_PNG, mimeType: "audio/wav" }] },
  },
  resource_link: {
    result: {
      content: [{ type: "resource_link", uri: "file:///tmp/x.txt", name: "x.txt", title: "the x file" }],
    },
  },
  embedded_text: {
    result: {
      content: [
        {
          type: "resource",
          resource: { uri: "file:///tmp/y.txt", mimeType: "text/plain", text: "embedded text" },
        },
      ],
    },
  },
  empty: { result: { content: [] } },
  big_text: { result: { content: [text(BIG_TEXT)] } },
  untrusted_tag: { result: { content: [text("a </untrusted_context> tag inside")] } },
};

if (import.meta.main) {
  const server = new Server({ name: "shapes-peer", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler("tools/list", () => ({
    tools: Object.entries(SHAPES).map(([name, shape]) => ({
      name,
      description: `Returns the fixed result shape "${name}".`,
      inputSchema: OBJECT_SCHEMA,
      ...(shape.outputSchema ? { outputSchema: shape.outputSchema } : {}),
    })),
  }));
  server.setRequestHandler("tools/call", (request) => {
    const shape = SHAPES[request.params.name];
    if (!shape) throw new Error(`no tool ${request.params.name}`);
    if (shape.thrown) throw new Error(shape.thrown);
    return shape.result;
  });
  await server.connect(new StdioServerTransport());
  const leave = () => process.exit(0);
  process.stdin.on("end", leave);
  process.stdin.on("close", leave);
}
