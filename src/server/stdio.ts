// The MCP stdio transport. Unlike the SDK's, it enforces the 1 MiB message limit on raw bytes before
// parsing. A bad line (too long, not UTF-8, not JSON, not JSON-RPC) is dropped whole and answered with a
// JSON-RPC error whose id is null: one bad line must never cost the sessions their state. What we owe
// the client is bounded (wire/json-rpc-pipe.ts), those refusals included: a client that stops reading
// stops being served, and then stops being read.
import {
  PROTOCOL_VERSION_META_KEY,
  type Transport,
  UnsupportedProtocolVersionError,
} from "@modelcontextprotocol/server";
import { serveStdio as serveBothEras } from "@modelcontextprotocol/server/stdio";
import { describe, JSONRPC_INTERNAL_ERROR, JSONRPC_INVALID_REQUEST } from "../errors.ts";
import {
  CLIENT_INPUT_WAITING_MAX_BYTES,
  CLIENT_OUTPUT_BACKLOG_MAX_BYTES,
  CLIENT_WRITE_QUEUE_MESSAGES,
  CLIENT_WRITE_STALL_MS,
  MCP_MESSAGE_MAX_BYTES,
} from "../limits.ts";
import { log } from "../log.ts";
import { sizeText } from "../text/size.ts";
import { JsonRpcPipe } from "../wire/json-rpc-pipe.ts";
import { isBlankLine, type JSONRPCMessage, parseJsonRpcLine } from "../wire/jsonrpc.ts";
import { OVERSIZED, type SplitLine } from "../wire/lines.ts";
import { createServer } from "./server.ts";
import type { ServerContext } from "./tools/tool.ts";

/**
 * Serves one client on our stdin/stdout until it goes; the opening message decides the era. A legacy
 * opening (no 2026-07-28 envelope: `initialize`, as VS Code and Codex send it) gets a legacy server
 * connected straight to the transport, as before 2026 existed. Any other opening goes through the SDK's
 * entry, which pins the connection to 2026-07-28 (or answers a revision it does not serve). The legacy
 * path does not go through that entry on purpose: the entry checks every outgoing message against the
 * SDK's schemas, about a fifth of the server's time on each cell.
 */
export async function serveStdio(ctx: ServerContext, onMessage?: () => void): Promise<void> {
  const transport = new StdioTransport(onMessage);
  const opening = await transport.opening;
  if (opening === undefined) return; // the client went before saying anything
  if (isLegacyOpening(opening)) {
    await createServer(ctx, "legacy").connect(transport);
  } else {
    serveBothEras(({ era }) => createServer(ctx, era), {
      transport,
      onerror: (error) => log.debug(`MCP stdio: ${describe(error)}`),
    });
  }
  await transport.ended;
}

/** The SDK entry's own rule: a first message without the 2026-07-28 envelope claim is 2025-era. */
function isLegacyOpening(message: JSONRPCMessage): boolean {
  if (!("method" in message)) return true;
  const meta = (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  return meta === undefined || !(CLAIM in meta);
}

const encoder = new TextEncoder();

/** The stateless revisions this SDK serves; a request claiming another is refused with -32022. */
const MODERN_REVISIONS = ["2026-07-28"];
const CLAIM = PROTOCOL_VERSION_META_KEY;

export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  private closed = false;
  private handler: ((message: JSONRPCMessage) => void) | undefined;
  /** Messages read before anyone took the transport (the opening, while its era is decided). */
  private readonly early: JSONRPCMessage[] = [];
  private open: (message: JSONRPCMessage | undefined) => void = () => {};
  /** The client's first message, read as soon as the transport exists (undefined: it went first). */
  readonly opening = new Promise<JSONRPCMessage | undefined>((resolve) => {
    this.open = resolve;
  });

  /** `onActivity` hears of every message delivered (serve.ts times the JIT policy by it). */
  constructor(private readonly onActivity?: () => void) {
    void this.pipe.read();
  }

  get onmessage(): ((message: JSONRPCMessage) => void) | undefined {
    return this.handler;
  }

  /** Whoever takes the transport first gets the messages read so far, in order. */
  set onmessage(handler: ((message: JSONRPCMessage) => void) | undefined) {
    this.handler = handler;
    if (!handler) return;
    for (const message of this.early.splice(0)) handler(message);
  }

  private end = () => {};
  /** Settles when the transport closes (the client went, or stalled), whoever owns its callbacks. */
  readonly ended = new Promise<void>((resolve) => {
    this.end = resolve;
  });
  private readonly pipe = new JsonRpcPipe(
    Bun.stdin.stream(),
    Bun.stdout.writer(),
    {
      lineMaxBytes: MCP_MESSAGE_MAX_BYTES,
      backlogMaxBytes: CLIENT_OUTPUT_BACKLOG_MAX_BYTES,
      waitingMaxBytes: CLIENT_INPUT_WAITING_MAX_BYTES,
      writeQueueLines: CLIENT_WRITE_QUEUE_MESSAGES,
      stallMs: CLIENT_WRITE_STALL_MS,
      what: "MCP client output",
    },
    {
      judge: (line) => this.judge(line),
      deliver: (message) => {
        this.onActivity?.();
        if (this.handler) this.handler(message);
        else {
          this.early.push(message);
          this.open(message);
        }
      },
      stalled: () => {
        log.error(
          `the MCP client read none of our output for ${CLIENT_WRITE_STALL_MS / 1000} s; stopping as if it had closed`,
        );
        void this.close();
      },
      ended: (error) => {
        if (error) log.warn(`stdin closed: ${describe(error)}`);
        void this.close();
      },
    },
  );

  /** Reading started with the transport, so that the opening can be looked at first. */
  async start(): Promise<void> {}

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return;
    const bytes = encode(message);
    if (bytes) await this.pipe.send(bytes);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pipe.close();
    this.open(undefined);
    this.onclose?.();
    this.end();
  }

  /** A message to serve, or the answer that refuses a line (the pipe writes it within the bound). */
  private judge(line: SplitLine): JSONRPCMessage | Uint8Array | undefined {
    if (line !== OVERSIZED && isBlankLine(line)) return undefined;
    const verdict =
      line === OVERSIZED
        ? {
            code: JSONRPC_INVALID_REQUEST,
            reason: `Message exceeds the ${MCP_MESSAGE_MAX_BYTES}-byte line limit; it was discarded unread`,
          }
        : parseJsonRpcLine(line);
    if ("message" in verdict) {
      const refused = unsupportedClaim(verdict.message);
      return refused ? encode(refused) : verdict.message;
    }
    log.warn(`discarded an input line: ${verdict.reason}`);
    // JSON-RPC wants `id: null` here, which the SDK's message type cannot say.
    const refusal = { jsonrpc: "2.0", id: null, error: { code: verdict.code, message: verdict.reason } };
    return encoder.encode(`${JSON.stringify(refusal)}\n`);
  }
}

/** One outgoing line; a message over the limit becomes an error answer (or nothing, for a notification). */
function encode(message: JSONRPCMessage): Uint8Array | undefined {
  const bytes = encoder.encode(`${JSON.stringify(message)}\n`);
  if (bytes.length <= MCP_MESSAGE_MAX_BYTES) return bytes;
  log.error(`dropping an outgoing message of ${bytes.length} bytes (limit ${MCP_MESSAGE_MAX_BYTES})`);
  if (!("id" in message) || message.id === undefined) return undefined;
  const error = {
    jsonrpc: "2.0" as const,
    id: message.id,
    error: {
      code: JSONRPC_INTERNAL_ERROR,
      message: `Response exceeds the ${sizeText(MCP_MESSAGE_MAX_BYTES)} message limit`,
    },
  };
  return encoder.encode(`${JSON.stringify(error)}\n`);
}

/**
 * The SDK's stdio entry checks the revision a connection opens with; a later request of the same
 * connection may claim another, which must not be served as if it were 2026-07-28.
 */
function unsupportedClaim(message: JSONRPCMessage): JSONRPCMessage | undefined {
  if (!("method" in message) || !("id" in message)) return undefined;
  const claim = (message.params?._meta as Record<string, unknown> | undefined)?.[CLAIM];
  if (claim === undefined || (typeof claim === "string" && MODERN_REVISIONS.includes(claim)))
    return undefined;
  const requested = typeof claim === "string" ? claim : "unknown";
  const error = new UnsupportedProtocolVersionError({ supported: MODERN_REVISIONS, requested });
  return {
    jsonrpc: "2.0",
    id: message.id,
    error: { code: error.code, message: error.message, data: error.data },
  };
}
