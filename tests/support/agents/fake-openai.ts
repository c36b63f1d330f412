// A scripted model behind a fake OpenAI Responses API (POST /v1/responses, streaming SSE or JSON), on
// 127.0.0.1, for a real client such as Codex CLI: it plays SCRIPT and records every request, so a test can
// read exactly what the client put in front of the model for each tool call.
//
// The next move is read off the conversation the client sends, never off a counter: the function calls the
// fake made carry call ids naming their step, and the step to play is the first whose output the
// conversation does not hold yet. Codex hides MCP tools behind its own `tool_search` tool (a hosted-style
// tool with `execution: "client"`), so before the first step the fake searches for the repl tools, exactly
// as a model does, and calls them the way the search returned them (a `namespace` of functions).
import type { Seen, Step } from "./script.ts";

/** One HTTP request the fake received, in arrival order. */
export interface RecordedRequest {
  method: string;
  path: string;
  /** The parsed JSON body (undefined for a body-less request, the raw text when it is not JSON). */
  body: unknown;
  /** What the fake did with it: "tool_search", "step:<name>", "final", "side", "unknown-path". */
  answer: string;
}

/** A tool as the model got it (from a tool_search output or from the request's own tools). */
export interface ModelTool {
  /** The name the model calls it by (inside its namespace when it has one). */
  name: string;
  /** The namespace the client put it in (Codex: mcp__<server>), if any. */
  namespace?: string;
  description: string;
  schema?: unknown;
}

export interface FakeOpenAIOptions {
  script: Step[];
  /** The MCP server's name in the client's configuration (Codex namespaces its tools mcp__<server>). */
  server: string;
  /** Only requests whose conversation contains this text are the scripted session; others are side requests. */
  marker: string;
  /** The query the fake model gives tool_search (BM25 over the deferred tools' metadata). */
  searchQuery?: string;
  /** How many tools the fake asks tool_search for (Codex's default is 8; repl-mcp has more). */
  searchLimit?: number;
}

export const FINAL_ANSWER = "The scripted session is over.";

type Item = Record<string, any>;

const STEP_CALL = /^call_(\d+)_/;

/** The step index a call id of ours names, or undefined for someone else's id. */
function stepOfCall(callId: unknown): number | undefined {
  const match = typeof callId === "string" ? STEP_CALL.exec(callId) : null;
  return match ? Number(match[1]) : undefined;
}

/** What the model saw in one function_call_output item: its text parts joined, its images decoded. */
export function seenOf(item: Item): Seen {
  const texts: string[] = [];
  const images: Seen["images"] = [];
  const output = item.output;
  if (typeof output === "string") texts.push(output);
  else if (Array.isArray(output)) {
    for (const part of output as Item[]) {
      if (part.type === "input_text" || part.type === "output_text") texts.push(String(part.text));
      else if (part.type === "input_image") images.push(imageOf(String(part.image_url ?? "")));
      else texts.push(JSON.stringify(part));
    }
  } else if (output && typeof output === "object") {
    // An older wire shape: { content, success }.
    texts.push(String((output as Item).content ?? JSON.stringify(output)));
  }
  // The Responses API's function_call_output has no error flag: a failure is only what the text says.
  return { text: texts.join("\n"), images, error: undefined, raw: item };
}

function imageOf(url: string): { mimeType: string; bytes: number } {
  const match = /^data:([^;,]+)(;base64)?,(.*)$/s.exec(url);
  if (!match) return { mimeType: `not a data URL: ${url.slice(0, 40)}`, bytes: 0 };
  const data = match[3] ?? "";
  const bytes = match[2] ? Buffer.from(data, "base64").length : decodeURIComponent(data).length;
  return { mimeType: match[1] ?? "", bytes };
}

/** The repl tools in a list of Responses API tools (a namespace of functions, or flat prefixed functions). */
function replToolsIn(tools: unknown, server: string): ModelTool[] {
  if (!Array.isArray(tools)) return [];
  const namespace = `mcp__${server}`;
  const found: ModelTool[] = [];
  for (const tool of tools as Item[]) {
    if (tool.type === "namespace" && tool.name === namespace && Array.isArray(tool.tools)) {
      for (const inner of tool.tools as Item[])
        found.push({
          name: String(inner.name),
          namespace,
          description: String(inner.description ?? ""),
          schema: inner.parameters,
        });
    } else if (tool.type === "function" && String(tool.name).startsWith(`${namespace}__`)) {
      found.push({
        name: String(tool.name),
        description: String(tool.description ?? ""),
        schema: tool.parameters,
      });
    }
  }
  return found;
}

export class FakeOpenAI {
  readonly requests: RecordedRequest[] = [];
  /** Step name -> what the model saw for that step's call (the latest conversation that held it). */
  readonly seen = new Map<string, Seen>();
  /** Step name -> the arguments the fake model called the step's tool with. */
  readonly asked = new Map<string, Record<string, unknown>>();
  /** The repl tools as the model got them (the last time they were offered). */
  tools: ModelTool[] = [];
  /** The namespace description the client gave the tools (Codex: the server's instructions), if any. */
  namespaceDescription: string | undefined;
  /** Why the script could not go on (a step's arguments could not be made), if it stopped early. */
  failure: string | undefined;
  private readonly server: ReturnType<typeof Bun.serve>;
  private responses = 0;

  constructor(private readonly options: FakeOpenAIOptions) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: (request) => this.handle(request),
    });
  }

  /** The base URL a client's provider configuration takes (with /v1). */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.server.port}/v1`;
  }

  stop(): void {
    this.server.stop(true);
  }

  private async handle(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const text = request.method === "GET" || request.method === "HEAD" ? "" : await request.text();
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = text;
    }
    const recorded: RecordedRequest = {
      method: request.method,
      path: url.pathname + url.search,
      body,
      answer: "",
    };
    this.requests.push(recorded);
    if (request.method === "GET" && url.pathname.endsWith("/models")) {
      recorded.answer = "models";
      return Response.json({ object: "list", data: [] });
    }
    if (request.method !== "POST" || !url.pathname.endsWith("/responses")) {
      recorded.answer = "unknown-path";
      return Response.json(
        {
          error: {
            message: `the fake OpenAI API serves POST /v1/responses only, not ${request.method} ${url.pathname}`,
          },
        },
        { status: 404 },
      );
    }
    const turn = (body ?? {}) as Item;
    const { answer, items } = await this.next(turn);
    recorded.answer = answer;
    return turn.stream === false ? this.json(items) : this.sse(items);
  }

  /** The model's next move for this conversation. */
  private async next(turn: Item): Promise<{ answer: string; items: Item[] }> {
    const input: Item[] = Array.isArray(turn.input) ? turn.input : [];
    if (!JSON.stringify(input).includes(this.options.marker))
      return { answer: "side", items: [this.message("OK.")] };

    const { script, server } = this.options;
    const offered = replToolsIn(turn.tools, server);
    for (const item of input) {
      if (item.type === "tool_search_output") {
        const found = replToolsIn(item.tools, server);
        if (found.length > 0) offered.push(...found);
        const namespace = (item.tools as Item[] | undefined)?.find((tool) => tool.name === `mcp__${server}`);
        if (namespace?.description) this.namespaceDescription = String(namespace.description);
      }
    }
    if (offered.length > 0) this.tools = dedupe(offered);

    const outputs = new Map<number, Item>();
    for (const item of input) {
      const step = item.type === "function_call_output" ? stepOfCall(item.call_id) : undefined;
      const name = step === undefined ? undefined : script[step]?.name;
      if (step === undefined || !name) continue;
      outputs.set(step, item);
      this.seen.set(name, seenOf(item));
    }

    const searchable =
      Array.isArray(turn.tools) && (turn.tools as Item[]).some((tool) => tool.type === "tool_search");
    if (this.tools.length === 0 && searchable) {
      return {
        answer: "tool_search",
        items: [
          {
            type: "tool_search_call",
            id: `tsc_${this.responses + 1}`,
            call_id: `search_${this.responses + 1}`,
            status: "completed",
            execution: "client",
            arguments: { query: this.options.searchQuery ?? "python", limit: this.options.searchLimit ?? 50 },
          },
        ],
      };
    }

    let index = 0;
    while (index < script.length && outputs.has(index)) index++;
    const step = script[index];
    if (!step || this.failure)
      return { answer: "final", items: [this.message(this.failure ?? FINAL_ANSWER)] };
    let args: Record<string, unknown>;
    try {
      args = step.args(this.seen);
    } catch (error) {
      this.failure = `the scripted model stopped before ${step.name}: ${(error as Error).message}`;
      return { answer: "final", items: [this.message(this.failure)] };
    }
    this.asked.set(step.name, args);
    if (step.delayMs) await Bun.sleep(step.delayMs);
    const tool = this.tools.find(
      (candidate) => candidate.name === step.tool || candidate.name.endsWith(`__${step.tool}`),
    );
    const call: Item = {
      type: "function_call",
      id: `fc_${index}`,
      call_id: `call_${index}_${step.name}`,
      name: tool?.name ?? step.tool,
      arguments: JSON.stringify(args),
      status: "completed",
    };
    if (tool?.namespace) call.namespace = tool.namespace;
    return { answer: `step:${step.name}`, items: [call] };
  }

  private message(text: string): Item {
    return {
      type: "message",
      id: `msg_${this.responses + 1}`,
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text, annotations: [] }],
    };
  }

  private response(items: Item[], status: string): Item {
    return {
      id: `resp_${this.responses}`,
      object: "response",
      status,
      output: status === "completed" ? items : [],
      usage: { input_tokens: 100, output_tokens: 10, total_tokens: 110 },
    };
  }

  private json(items: Item[]): Response {
    this.responses++;
    return Response.json(this.response(items, "completed"));
  }

  /** The events Codex's stream parser reads: created, each item added and done, completed. */
  private sse(items: Item[]): Response {
    this.responses++;
    const events: Item[] = [{ type: "response.created", response: this.response(items, "in_progress") }];
    items.forEach((item, output_index) => {
      events.push({ type: "response.output_item.added", output_index, item });
      if (item.type === "message") {
        const text = String(item.content?.[0]?.text ?? "");
        events.push({
          type: "response.output_text.delta",
          item_id: item.id,
          output_index,
          content_index: 0,
          delta: text,
        });
      }
      events.push({ type: "response.output_item.done", output_index, item });
    });
    events.push({ type: "response.completed", response: this.response(items, "completed") });
    const text = events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join("");
    return new Response(text, {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  }
}

function dedupe(tools: ModelTool[]): ModelTool[] {
  const byName = new Map<string, ModelTool>();
  for (const tool of tools) byName.set(`${tool.namespace ?? ""}/${tool.name}`, tool);
  return [...byName.values()];
}
