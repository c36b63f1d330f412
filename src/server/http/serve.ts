// The Streamable HTTP transport: Bun.serve answering at /mcp. Every request passes the guard (Host,
// Origin, token) and the body limit before MCP sees it, then goes to its MCP session's SDK transport;
// event streams leave through a backlog meter so a client that stops reading cannot grow them forever.
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { describe } from "../../errors.ts";
import {
  HTTP_BODY_READ_TIMEOUT_MS,
  HTTP_UNAUTHENTICATED_IDLE_SECONDS,
  MCP_MESSAGE_MAX_BYTES,
  SESSIONS_MAX,
} from "../../limits.ts";
import { log } from "../../log.ts";
import type { Sessions } from "../../sessions/registry.ts";
import { type Backlog, metered } from "./backlog.ts";
import { readJsonBody } from "./body.ts";
import { type Client, Clients } from "./clients.ts";
import { Guard } from "./guard.ts";
import { isLoopback, StartupError, TOKEN_ENV } from "./token.ts";

export interface HttpServeOptions {
  host: string;
  port: number;
  token: string | undefined;
  allowedOrigins: string[];
  allowedHosts: string[];
  idleTimeoutS: number;
  maxMemoryMib: number;
}

export interface HttpServer {
  url: string;
  /** Stops listening and ends every MCP session (their Python sessions close). */
  close(): Promise<void>;
}

export function serveHttp(pool: Sessions, options: HttpServeOptions): HttpServer {
  if (!isLoopback(options.host) && options.token === undefined) {
    throw new StartupError(
      `--host ${options.host} is not a loopback address, so anyone who can reach it could run code on this ` +
        `machine; give a bearer token with --auth-token-file FILE (mode 0600) or $${TOKEN_ENV}`,
    );
  }
  const guard = new Guard({ bindHost: options.host, ...options });
  const clients = new Clients(pool, options.maxMemoryMib, options.idleTimeoutS);
  let bun: Bun.Server<undefined>;
  try {
    bun = Bun.serve({
      hostname: options.host,
      port: options.port,
      idleTimeout: HTTP_UNAUTHENTICATED_IDLE_SECONDS,
      // A backstop only: the MCP limit is enforced after authentication, with a JSON-RPC answer.
      maxRequestBodySize: 2 * MCP_MESSAGE_MAX_BYTES,
      fetch: (request, server) =>
        handle(request, server, guard, clients).catch((error) => {
          log.error("HTTP request failed:", describe(error));
          return jsonError(500, -32603, "Internal error");
        }),
    });
  } catch (error) {
    throw new StartupError(`cannot listen on ${options.host} port ${options.port}: ${describe(error)}`);
  }
  const host =
    options.host.includes(":") && !options.host.startsWith("[") ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${bun.port}/mcp`,
    async close() {
      bun.stop(true);
      await clients.endAll("server shutdown");
    },
  };
}

async function handle(
  request: Request,
  bun: Bun.Server<undefined>,
  guard: Guard,
  clients: Clients,
): Promise<Response> {
  const refusal = guard.check(request);
  if (refusal) {
    const headers: Record<string, string> =
      refusal.status === 401 ? { "WWW-Authenticate": 'Bearer realm="repl-mcp"' } : {};
    return jsonError(refusal.status, -32001, refusal.message, headers);
  }
  if (new URL(request.url).pathname !== "/mcp")
    return jsonError(404, -32000, "Not found; MCP is served at /mcp");
  // Event streams stay open while cells run; the SDK's keep-alive comments are the liveness signal.
  // The body read below keeps a deadline of its own.
  bun.timeout(request, 0);
  let parsedBody: unknown;
  if (request.method === "POST") {
    const body = await readJsonBody(request, MCP_MESSAGE_MAX_BYTES, HTTP_BODY_READ_TIMEOUT_MS);
    if ("status" in body) return jsonError(body.status, body.code, body.message, body.headers);
    parsedBody = body.json;
  }
  const client = await route(request, parsedBody, clients);
  if (client instanceof Response) return client;
  client.lastSeen = performance.now();
  const response = await client.transport.handleRequest(request, { parsedBody });
  if (client.id === undefined) void clients.end(client, "initialization failed");
  return withBoundedStream(response, client.backlog);
}

/** The client a request belongs to: by Mcp-Session-Id, or a new one for an initialize request. */
async function route(request: Request, body: unknown, clients: Clients): Promise<Client | Response> {
  const sessionId = request.headers.get("mcp-session-id");
  if (sessionId !== null) {
    return (
      clients.get(sessionId) ?? jsonError(404, -32001, "MCP session not found or ended; initialize a new one")
    );
  }
  const initializing = Array.isArray(body) ? body.some(isInitializeRequest) : isInitializeRequest(body);
  if (request.method !== "POST" || !initializing) {
    return jsonError(400, -32000, "Mcp-Session-Id header required; start with an initialize request");
  }
  const client = await clients.open();
  if (client) return client;
  return jsonError(
    503,
    -32000,
    `The server holds its maximum of ${SESSIONS_MAX} sessions; end an MCP session or close Python sessions`,
  );
}

function withBoundedStream(response: Response, backlog: Backlog): Response {
  if (!response.body || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return response;
  }
  return new Response(metered(response.body, backlog), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

function jsonError(status: number, code: number, message: string, headers: Record<string, string> = {}) {
  return Response.json({ jsonrpc: "2.0", id: null, error: { code, message } }, { status, headers });
}
