// A scripted model behind an OpenAI Chat Completions API (`POST /v1/chat/completions`, streaming SSE or
// one JSON answer), for clients that speak it to a custom provider (GitHub Copilot CLI's BYOK default).
// It plays SCRIPT: one tool call per step, then a plain answer. Which step comes next is read off the
// conversation the client sends (the tool messages answering our own call ids), never off a request
// counter, so a side request (a session title, a summary) neither advances the script nor breaks it.
import type { Seen, SeenSoFar, Step } from "./script.ts";

export interface ChatTool {
  type?: string;
  function?: { name?: string; description?: string; parameters?: unknown };
}

interface ChatMessage {
  role?: string;
  content?: unknown;
  tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[];
  tool_call_id?: string;
}

interface ChatRequest {
  model?: string;
  stream?: boolean;
  messages?: ChatMessage[];
  tools?: ChatTool[];
}

export interface FakeChatOptions {
  script: Step[];
  /** How the client names an MCP tool to its model (Copilot: `repl-execute_python` for `repl`). */
  toolName(tool: string): string;
  /**
   * The client's tool-search tool, called first when the client offers it (Copilot lists MCP tools as
   * deferred and tells the model to search before calling one, as a real model does).
   */
  search?: { tool: string; args: Record<string, unknown> };
  /** The last words of the run. */
  finalAnswer?: string;
}

/** A call id the fake model recognizes as its own when the client sends the conversation back. */
const callId = (index: number) => `call_step_${index}`;
const SEARCH_CALL = "call_search";

/** The text parts and image parts of one message's content, in the client's order. */
function partsOf(content: unknown): { texts: string[]; images: Seen["images"] } {
  if (typeof content === "string") return { texts: [content], images: [] };
  const texts: string[] = [];
  const images: Seen["images"] = [];
  if (!Array.isArray(content)) return { texts, images };
  for (const part of content) {
    if (part?.type === "text" && typeof part.text === "string") texts.push(part.text);
    if (part?.type === "image_url") {
      const url = String(part.image_url?.url ?? "");
      const data = url.match(/^data:([^;,]+);base64,(.*)$/s);
      images.push(
        data
          ? { mimeType: data[1] as string, bytes: Buffer.from(data[2] as string, "base64").length }
          : { mimeType: "url", bytes: 0 },
      );
    }
  }
  return { texts, images };
}

export class FakeChatCompletions {
  /** Every request body, parsed, in arrival order (side requests included). */
  readonly requests: unknown[] = [];
  /** Step name -> what the model got for that step's call (first time the client sent it). */
  readonly seen = new Map<string, Seen>();
  /** The tools of the first request that offered the script's tools. */
  tools: ChatTool[] = [];
  /** The content the client answered the tool search with, when it offered one. */
  searched: unknown;
  /** What went wrong inside the fake (a bad request, a step whose arguments could not be made). */
  readonly problems: string[] = [];
  private readonly server: ReturnType<typeof Bun.serve>;

  constructor(private readonly options: FakeChatOptions) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: (request) => this.handle(request),
    });
  }

  /** The base URL a client is given (it appends `/chat/completions`). */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.server.port}/v1`;
  }

  stop(): void {
    this.server.stop(true);
  }

  private async handle(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (request.method === "GET" && path.endsWith("/models")) {
      return Response.json({ object: "list", data: [{ id: "scripted", object: "model", owned_by: "test" }] });
    }
    if (request.method !== "POST" || !path.endsWith("/chat/completions")) {
      this.problems.push(`unexpected ${request.method} ${path}`);
      return Response.json({ error: { message: `no such endpoint: ${path}` } }, { status: 404 });
    }
    let body: ChatRequest;
    try {
      body = (await request.json()) as ChatRequest;
    } catch (error) {
      this.problems.push(`a request body that is not JSON: ${error}`);
      return Response.json({ error: { message: "body is not JSON" } }, { status: 400 });
    }
    this.requests.push(body);
    const reply = await this.reply(body);
    return body.stream ? this.streamed(body, reply) : this.whole(body, reply);
  }

  /** The next move: a tool call for the first step without a result yet, or the final words. */
  private async reply(
    body: ChatRequest,
  ): Promise<{ text?: string; call?: { id: string; name: string; args: string } }> {
    const names = new Set((body.tools ?? []).map((tool) => tool.function?.name));
    const first = this.options.script[0];
    // A side request (a title, a summary) is not offered the script's tools: answer it in words.
    if (!first || !names.has(this.options.toolName(first.tool))) return { text: "Scripted session" };
    if (this.tools.length === 0) this.tools = body.tools ?? [];
    this.read(body.messages ?? []);
    const search = this.options.search;
    if (search && names.has(search.tool) && this.searched === undefined) {
      return { call: { id: SEARCH_CALL, name: search.tool, args: JSON.stringify(search.args) } };
    }
    const index = this.options.script.findIndex((step) => !this.seen.has(step.name));
    const step = this.options.script[index];
    if (!step) return { text: this.options.finalAnswer ?? "All steps are done." };
    if (step.delayMs) await Bun.sleep(step.delayMs);
    let args: Record<string, unknown>;
    try {
      args = step.args(this.seen as SeenSoFar);
    } catch (error) {
      this.problems.push(String(error));
      return { text: `The script stopped at ${step.name}: ${error}` };
    }
    return {
      call: { id: callId(index), name: this.options.toolName(step.tool), args: JSON.stringify(args) },
    };
  }

  /**
   * Records, for each of our calls answered in the conversation, the tool message and anything the
   * client added for the model right after it (a user message with the call's pictures) before the next
   * assistant turn.
   */
  private read(messages: ChatMessage[]): void {
    messages.forEach((message, at) => {
      if (message.role !== "tool" || typeof message.tool_call_id !== "string") return;
      if (message.tool_call_id === SEARCH_CALL) {
        this.searched ??= message.content;
        return;
      }
      const match = message.tool_call_id.match(/^call_step_(\d+)$/);
      const step = match ? this.options.script[Number(match[1])] : undefined;
      if (!step || this.seen.has(step.name)) return;
      const { texts, images } = partsOf(message.content);
      const raw: unknown[] = [message];
      for (const next of messages.slice(at + 1)) {
        if (next.role !== "user") break;
        const extra = partsOf(next.content);
        texts.push(...extra.texts);
        images.push(...extra.images);
        raw.push(next);
      }
      this.seen.set(step.name, {
        text: texts.join("\n"),
        images,
        error: undefined,
        raw: raw.length === 1 ? raw[0] : raw,
      });
    });
  }

  private whole(
    body: ChatRequest,
    reply: { text?: string; call?: { id: string; name: string; args: string } },
  ) {
    const message = reply.call
      ? {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: reply.call.id,
              type: "function",
              function: { name: reply.call.name, arguments: reply.call.args },
            },
          ],
        }
      : { role: "assistant", content: reply.text };
    return Response.json({
      id: `chatcmpl-${crypto.randomUUID()}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: body.model ?? "scripted",
      choices: [{ index: 0, message, finish_reason: reply.call ? "tool_calls" : "stop" }],
      usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
    });
  }

  private streamed(
    body: ChatRequest,
    reply: { text?: string; call?: { id: string; name: string; args: string } },
  ) {
    const id = `chatcmpl-${crypto.randomUUID()}`;
    const chunk = (delta: unknown, finish: string | null, extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created: Math.floor(Date.now() / 1000),
        model: body.model ?? "scripted",
        choices: [{ index: 0, delta, finish_reason: finish }],
        ...extra,
      })}\n\n`;
    const events = [chunk({ role: "assistant", content: "" }, null)];
    if (reply.call) {
      events.push(
        chunk(
          {
            tool_calls: [
              {
                index: 0,
                id: reply.call.id,
                type: "function",
                function: { name: reply.call.name, arguments: "" },
              },
            ],
          },
          null,
        ),
        chunk({ tool_calls: [{ index: 0, function: { arguments: reply.call.args } }] }, null),
      );
    } else {
      events.push(chunk({ content: reply.text }, null));
    }
    events.push(chunk({}, reply.call ? "tool_calls" : "stop"));
    events.push(
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created: Math.floor(Date.now() / 1000),
        model: body.model ?? "scripted",
        choices: [],
        usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
      })}\n\n`,
      "data: [DONE]\n\n",
    );
    return new Response(events.join(""), {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  }
}
