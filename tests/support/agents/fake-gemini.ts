// A scripted Gemini API (generativelanguage v1beta) on 127.0.0.1, for driving the real Gemini CLI: it
// answers `:streamGenerateContent?alt=sse`, `:generateContent` and `:countTokens`, records every request
// body, and plays SCRIPT one tool call per turn. The step to play is read off the conversation the client
// sends (which of our call ids already have a functionResponse), never from a counter, because the client
// also sends side requests (model routing, next-speaker checks, loop detection, summaries) that must not
// advance the script.
import type { Seen, SeenSoFar, Step } from "./script.ts";

/** Gemini CLI's name for tool T of the MCP server it knows as S: `mcp_S_T` (mcp-tool.ts generateValidName). */
export const toolPrefix = (server: string) => `mcp_${server}_`;
/** Put in the prompt, so the fake can tell the agent's own conversation from a side request's. */
export const MARKER = "REPL-MCP-SCRIPTED-SESSION";
/** Our call ids; the client prefixes them with `<tool>__` and sends them back on the functionResponse. */
const CALL_ID = /(?:^|__)step-(\d+)$/;

type Part = Record<string, any>;
interface Content {
  role?: string;
  parts?: Part[];
}
export interface GenerateRequest {
  contents?: Content[];
  tools?: {
    functionDeclarations?: {
      name: string;
      description?: string;
      parametersJsonSchema?: unknown;
      parameters?: unknown;
    }[];
  }[];
  generationConfig?: Record<string, any>;
  systemInstruction?: unknown;
}

export interface Recorded {
  path: string;
  body: unknown;
}

export interface FakeGemini {
  url: string;
  /** Every request, in arrival order. */
  recorded: Recorded[];
  /** What the model saw for each answered step (in the first conversation that holds it). */
  seen: Map<string, Seen>;
  /** The arguments the model called each step with. */
  calls: Map<string, Record<string, unknown>>;
  /** The repl tools as the client declared them to the model in its last agent request. */
  tools: { name: string; description: string; schema?: unknown }[];
  /** Problems the fake met (an unknown route, an args function that threw): the test reports them. */
  problems: string[];
  /** The model-visible names the agent requests carried (the URL's model), for the report. */
  models: Set<string>;
  finished: boolean;
  stop(): void;
}

const decodedBytes = (base64: string) => Buffer.from(base64, "base64").length;

/** The text of a response object: `output`, then `error`, then any other string fields, in that order. */
function responseText(response: Record<string, unknown> | undefined): string {
  if (!response) return "";
  const keys = Object.keys(response).sort(
    (a, b) => ["output", "error"].indexOf(b) - ["output", "error"].indexOf(a),
  );
  return keys
    .map((key) => response[key])
    .map((value) => (typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value)))
    .filter((text) => text !== "")
    .join("\n");
}

/**
 * Reads what the model got for each of our calls in one conversation: the functionResponse part (its
 * `response.output` or `response.error`, and any images nested in `functionResponse.parts`), plus the parts
 * the client sent beside it in the same turn (images go there for models without multimodal function
 * responses), up to the next functionResponse.
 */
export function seenIn(request: GenerateRequest, script: Step[]): Map<string, Seen> {
  const seen = new Map<string, Seen>();
  for (const content of request.contents ?? []) {
    const parts = content.parts ?? [];
    for (let at = 0; at < parts.length; at++) {
      const answer = parts[at]?.functionResponse;
      if (!answer) continue;
      const index = Number(String(answer.id ?? "").match(CALL_ID)?.[1] ?? Number.NaN);
      const step = script[index];
      if (!step) continue;
      const beside: Part[] = [];
      for (let next = at + 1; next < parts.length && !parts[next]?.functionResponse; next++)
        beside.push(parts[next] as Part);
      const nested: Part[] = Array.isArray(answer.parts) ? answer.parts : [];
      const response = answer.response as Record<string, unknown> | undefined;
      const texts = [
        responseText(response),
        ...beside.filter((p) => typeof p.text === "string").map((p) => p.text),
      ];
      const images = [...nested, ...beside]
        .filter((p) => p.inlineData && String(p.inlineData.mimeType).startsWith("image/"))
        .map((p) => ({
          mimeType: String(p.inlineData.mimeType),
          bytes: decodedBytes(String(p.inlineData.data)),
        }));
      seen.set(step.name, {
        text: texts.filter((text) => text !== "").join("\n"),
        images,
        // The Gemini API's own convention: a functionResponse carries `output` on success, `error` on failure.
        error: response !== undefined && "error" in response,
        raw: beside.length > 0 ? [parts[at], ...beside] : parts[at],
      });
    }
  }
  return seen;
}

/**
 * Answers the client's side requests that ask for JSON would get from a model, by field name where a
 * made-up value would be refused: the router's complexity score must lie in 1..100 (a low one routes the
 * session to the flash model, as a real classifier does for a list of explicit steps).
 */
const SIDE_ANSWERS: Record<string, unknown> = { complexity_score: 10 };

/** A value that fits a response JSON schema (for the client's side requests that ask for JSON). */
function sample(schema: any, field = ""): unknown {
  if (field in SIDE_ANSWERS) return SIDE_ANSWERS[field];
  if (!schema || typeof schema !== "object") return "";
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  const type = String(schema.type ?? "").toLowerCase();
  if (type === "object" || schema.properties) {
    const value: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(schema.properties ?? {})) value[key] = sample(inner, key);
    return value;
  }
  if (type === "array") return [];
  if (type === "number" || type === "integer") return 0;
  if (type === "boolean") return false;
  return "none";
}

const usage = { promptTokenCount: 100, candidatesTokenCount: 10, totalTokenCount: 110 };

function candidate(parts: Part[]) {
  return {
    candidates: [{ content: { role: "model", parts }, finishReason: "STOP", index: 0 }],
    usageMetadata: usage,
    modelVersion: "fake-gemini",
  };
}

function isAgentTurn(request: GenerateRequest, prefix: string): boolean {
  const config = request.generationConfig ?? {};
  if (config.responseJsonSchema || config.responseSchema || config.responseMimeType === "application/json")
    return false;
  const declared = (request.tools ?? []).flatMap((tool) => tool.functionDeclarations ?? []);
  if (!declared.some((fn) => fn.name.startsWith(prefix))) return false;
  const first = (request.contents ?? []).find((content) => content.role === "user");
  return JSON.stringify(first ?? {}).includes(MARKER);
}

/** `server`: the name the client knows the MCP server by (its tools are `mcp_<server>_<tool>`). */
export function startFakeGemini(script: Step[], server = "repl"): FakeGemini {
  const prefix = toolPrefix(server);
  const fake: FakeGemini = {
    url: "",
    recorded: [],
    seen: new Map(),
    calls: new Map(),
    tools: [],
    problems: [],
    models: new Set(),
    finished: false,
    stop: () => http.stop(true),
  };

  /** The next part the model sends in the agent's conversation. */
  async function play(request: GenerateRequest): Promise<Part[]> {
    const declared = (request.tools ?? []).flatMap((tool) => tool.functionDeclarations ?? []);
    fake.tools = declared
      .filter((fn) => fn.name.startsWith(prefix))
      .map((fn) => ({
        name: fn.name,
        description: fn.description ?? "",
        schema: fn.parametersJsonSchema ?? fn.parameters,
      }));
    const seen = seenIn(request, script);
    // The first request that carries a result is the one the model acted on; later ones repeat the history.
    for (const [name, entry] of seen) if (!fake.seen.has(name)) fake.seen.set(name, entry);
    const next = script.findIndex((step) => !seen.has(step.name));
    const step = next < 0 ? undefined : script[next];
    if (!step) {
      fake.finished = true;
      return [{ text: "All steps are done." }];
    }
    let args: Record<string, unknown>;
    try {
      args = step.args(seen as SeenSoFar);
    } catch (error) {
      fake.problems.push(`step ${step.name}: ${(error as Error).message}`);
      fake.finished = true;
      return [{ text: `I cannot go on: ${(error as Error).message}` }];
    }
    fake.calls.set(step.name, args);
    if (step.delayMs) await Bun.sleep(step.delayMs);
    return [{ functionCall: { id: `step-${next}`, name: prefix + step.tool, args } }];
  }

  async function answer(request: GenerateRequest, model: string): Promise<Part[]> {
    if (isAgentTurn(request, prefix)) {
      fake.models.add(model);
      return play(request);
    }
    const config = request.generationConfig ?? {};
    const schema = config.responseJsonSchema ?? config.responseSchema;
    if (schema || config.responseMimeType === "application/json")
      return [{ text: JSON.stringify(sample(schema ?? { type: "object" })) }];
    return [{ text: "OK." }];
  }

  const http = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch: async (incoming) => {
      const url = new URL(incoming.url);
      const text = incoming.method === "POST" ? await incoming.text() : "";
      let body: unknown = text;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        // recorded as the text it was
      }
      fake.recorded.push({ path: `${incoming.method} ${url.pathname}${url.search}`, body });
      const route = url.pathname.match(/^\/v1(?:beta|alpha)?\/models\/([^:/]+):(\w+)$/);
      const [, model = "", method = ""] = route ?? [];
      const request = (body ?? {}) as GenerateRequest;
      if (method === "countTokens") {
        const tokens = Math.ceil(text.length / 4);
        return Response.json({ totalTokens: tokens });
      }
      if (method === "streamGenerateContent") {
        const parts = await answer(request, model);
        const event = `data: ${JSON.stringify(candidate(parts))}\r\n\r\n`;
        return new Response(event, { headers: { "content-type": "text/event-stream" } });
      }
      if (method === "generateContent") return Response.json(candidate(await answer(request, model)));
      fake.problems.push(`unexpected request ${incoming.method} ${url.pathname}`);
      return Response.json(
        { error: { code: 404, message: "not in the fake", status: "NOT_FOUND" } },
        { status: 404 },
      );
    },
  });
  fake.url = `http://127.0.0.1:${http.port}`;
  return fake;
}
