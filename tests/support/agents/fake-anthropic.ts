// A scripted model behind a fake Anthropic Messages API on 127.0.0.1, for driving a real client (Claude
// Code) through SCRIPT: `POST /v1/messages` (streaming SSE or one JSON answer, as the request asks) and
// `POST /v1/messages/count_tokens` (and the `/api/hello` connectivity check). Every request is recorded as it came; any other path gets a 404 that
// names it, and is recorded too, so a test sees what else the client tried to reach.
//
// The model decides what to do next from the conversation it is sent, never from a counter: it finds the
// tool_use ids it gave out (each names its step) and the tool_result blocks answering them, so a side
// request (a title, a summary, a quota check) or a retried request cannot move the script along.
import type { Seen, Step } from "./script.ts";

export interface Recorded {
  method: string;
  path: string;
  /** The request body, parsed when it was JSON. */
  body: unknown;
  /** What the fake made of it: a turn of the scripted conversation, a side request, a token count, … */
  kind: "turn" | "side" | "count_tokens" | "hello" | "unknown";
}

export interface FakeAnthropicOptions {
  script: Step[];
  /** The client's prefix for the server's tools: Claude Code names them mcp__<server>__<tool>. */
  toolPrefix: string;
  /** The client's tool that loads deferred tools (Claude Code's ToolSearch), called before the script. */
  searchTool?: string;
}

type Block = Record<string, any>;
type Message = { role: string; content: string | Block[] };

const SEARCH_ID = "toolu_search_01";
const STEP_ID = /^toolu_step_(\d+)_/;

/** Decoded size of base64 data, without decoding it. */
function base64Bytes(data: string): number {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return (data.length * 3) / 4 - padding;
}

/** What the model got in one tool_result block. */
export function seenOf(block: Block): Seen {
  const parts: Block[] =
    typeof block.content === "string" ? [{ type: "text", text: block.content }] : (block.content ?? []);
  return {
    text: parts
      .filter((part) => part.type === "text")
      .map((part) => part.text as string)
      .join("\n"),
    images: parts
      .filter((part) => part.type === "image" && part.source?.type === "base64")
      .map((part) => ({ mimeType: part.source.media_type as string, bytes: base64Bytes(part.source.data) })),
    error: block.is_error === true,
    raw: block,
  };
}

function blocksOf(message: Message): Block[] {
  return typeof message.content === "string" ? [] : message.content;
}

export class FakeAnthropic {
  readonly requests: Recorded[] = [];
  /** step name -> what the model saw for that call (the latest request that carried it). */
  readonly seen = new Map<string, Seen>();
  /** Set when the script could not go on (an id the model could not find, a step it could not build). */
  failure: string | undefined;
  private readonly server: ReturnType<typeof Bun.serve>;

  constructor(private readonly options: FakeAnthropicOptions) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: (request) => this.answer(request),
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  /** The paths the client asked for that this fake does not serve. */
  get unknownPaths(): string[] {
    return this.requests.filter((entry) => entry.kind === "unknown").map((e) => `${e.method} ${e.path}`);
  }

  /** Bodies of the scripted conversation's turns, in order. */
  get turns(): Record<string, any>[] {
    return this.requests.filter((entry) => entry.kind === "turn").map((entry) => entry.body as any);
  }

  stop(): void {
    this.server.stop(true);
  }

  private async answer(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const text = request.method === "POST" ? await request.text() : "";
    let body: any = text;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      // recorded as the text it was
    }
    const record = (kind: Recorded["kind"]) =>
      this.requests.push({ method: request.method, path: url.pathname + url.search, body, kind });

    // Claude Code's connectivity check (sent unless CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is set).
    if (url.pathname === "/api/hello") {
      record("hello");
      return new Response(null, { status: 200 });
    }
    if (request.method === "POST" && url.pathname === "/v1/messages/count_tokens") {
      record("count_tokens");
      return Response.json({ input_tokens: Math.ceil(text.length / 4) });
    }
    if (request.method === "POST" && url.pathname === "/v1/messages" && body && typeof body === "object") {
      const turn = this.isTurn(body);
      record(turn ? "turn" : "side");
      const content = turn ? await this.nextMove(body.messages ?? []) : this.sideAnswer(body);
      return this.reply(body, content);
    }
    record("unknown");
    return Response.json(
      {
        type: "error",
        error: {
          type: "not_found_error",
          message: `the fake Anthropic API serves POST /v1/messages and /v1/messages/count_tokens, not ${request.method} ${url.pathname}`,
        },
      },
      { status: 404 },
    );
  }

  /** A turn of the scripted conversation offers the search tool or the server's tools; side requests don't. */
  private isTurn(body: Record<string, any>): boolean {
    const names: string[] = (body.tools ?? []).map((tool: Block) => String(tool.name));
    return names.some((name) => name === this.options.searchTool || name.startsWith(this.options.toolPrefix));
  }

  /** A side request gets a short answer (an object of the asked-for JSON schema's shape when there is one). */
  private sideAnswer(body: Record<string, any>): Block[] {
    const schema = body.output_config?.format?.schema ?? body.output_format?.schema;
    return [{ type: "text", text: schema ? JSON.stringify(sample(schema)) : "Scripted session" }];
  }

  /** The model's next move, read off the conversation: the search, the next step, or the final answer. */
  private async nextMove(messages: Message[]): Promise<Block[]> {
    const results = new Map<string, Block>();
    for (const message of messages)
      for (const block of blocksOf(message))
        if (block.type === "tool_result") results.set(String(block.tool_use_id), block);

    let done = -1;
    for (const [id, block] of results) {
      const step = id.match(STEP_ID);
      if (!step) continue;
      const index = Number(step[1]);
      const name = this.options.script[index]?.name;
      if (name !== undefined) this.seen.set(name, seenOf(block));
      done = Math.max(done, index);
    }

    const { script, toolPrefix, searchTool } = this.options;
    if (done < 0 && searchTool && !results.has(SEARCH_ID)) {
      const tools = [...new Set(script.map((step) => toolPrefix + step.tool))];
      return [
        { type: "text", text: "Loading the Python tools first." },
        {
          type: "tool_use",
          id: SEARCH_ID,
          name: searchTool,
          input: { query: `select:${tools.join(",")}`, max_results: tools.length },
        },
      ];
    }
    const index = done + 1;
    const step = script[index];
    if (this.failure || !step)
      return [{ type: "text", text: this.failure ?? "The scripted session is over." }];
    let input: Record<string, unknown>;
    try {
      input = step.args(this.seen);
    } catch (error) {
      this.failure = `step ${step.name}: ${error instanceof Error ? error.message : String(error)}`;
      return [{ type: "text", text: `The scripted model stopped at ${this.failure}` }];
    }
    if (step.delayMs) await Bun.sleep(step.delayMs);
    return [
      { type: "text", text: `Step ${step.name}.` },
      {
        type: "tool_use",
        id: `toolu_step_${index}_${crypto.randomUUID().slice(0, 8)}`,
        name: toolPrefix + step.tool,
        input,
      },
    ];
  }

  private reply(body: Record<string, any>, content: Block[]): Response {
    const stopReason = content.some((block) => block.type === "tool_use") ? "tool_use" : "end_turn";
    const usage = {
      input_tokens: 100,
      output_tokens: 20,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    };
    const message = {
      id: `msg_${crypto.randomUUID().replaceAll("-", "")}`,
      type: "message",
      role: "assistant",
      model: body.model ?? "claude-fake",
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage,
    };
    if (!body.stream) return Response.json(message);

    const events: string[] = [];
    const send = (type: string, data: Record<string, unknown>) =>
      events.push(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    send("message_start", {
      message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } },
    });
    content.forEach((block, index) => {
      if (block.type === "tool_use") {
        send("content_block_start", { index, content_block: { ...block, input: {} } });
        send("content_block_delta", {
          index,
          delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) },
        });
      } else {
        send("content_block_start", { index, content_block: { type: "text", text: "" } });
        send("content_block_delta", { index, delta: { type: "text_delta", text: block.text } });
      }
      send("content_block_stop", { index });
    });
    send("message_delta", {
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: usage.output_tokens },
    });
    send("message_stop", {});
    return new Response(events.join(""), {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  }
}

/** The smallest value of a JSON schema's shape (for a side request that asks for structured output). */
function sample(schema: Record<string, any>): unknown {
  if (schema.enum) return schema.enum[0];
  if (schema.const !== undefined) return schema.const;
  switch (schema.type) {
    case "object":
      return Object.fromEntries(
        Object.entries((schema.properties ?? {}) as Record<string, any>)
          .filter(([key]) => (schema.required ?? []).includes(key))
          .map(([key, value]) => [key, sample(value)]),
      );
    case "array":
      return [];
    case "boolean":
      return false;
    case "number":
    case "integer":
      return 0;
    default:
      return "Scripted session";
  }
}
