// The Streamable HTTP transport: Bun.serve answering at /mcp, in both protocol eras. Every request
// passes the guard (Host and Origin, then the token for /mcp; any other path is 404 without one, so a
// client learns there is no OAuth to discover) and the body limit before MCP sees it. A 2026-07-28
// request (its body carries the per-request envelope) is served statelessly for its principal
// (principals.ts); any other request goes to its legacy MCP session's SDK transport (clients.ts).
// Event streams leave through a backlog meter so a client that stops reading cannot grow them forever.

import { isInitializeRequest, isJsonContentType, isLegacyRequest } from "@modelcontextprotocol/server";
import { describe } from "../../errors.ts";
import {
  HTTP_BODY_READ_TIMEOUT_MS,
  HTTP_UNAUTHENTICATED_IDLE_SECONDS,
  MCP_MESSAGE_MAX_BYTES,
  SESSIONS_MAX,
} from "../../limits.ts";
import { log } from "../../log.ts";
import type { Sessions } from "../../sessions/registry.ts";
import type { ClientSettings } from "../tools/tool.ts";
import { withBoundedStream } from "./backlog.ts";
import { readJsonBody } from "./body.ts";
import { type Client, Clients } from "./clients.ts";
import { Guard } from "./guard.ts";
import { Principals } from "./principals.ts";
import { isLoopback, StartupError, TOKEN_ENV } from "./token.ts";

export interface HttpServeOptions {
  host: string;
  port: number;
  token: string | undefined;
  allowedOrigins: string[];
  allowedHosts: string[];
  idleTimeoutS: number;
  settings: ClientSettings;
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
  const clients = new Clients(pool, options.settings, options.idleTimeoutS);
  const principals = new Principals(pool, options.settings, options.idleTimeoutS);
  let bun: Bun.Server<undefined>;
  try {
    bun = Bun.serve({
      hostname: options.host,
      port: options.port,
      idleTimeout: HTTP_UNAUTHENTICATED_IDLE_SECONDS,
      // A backstop only: the MCP limit is enforced after authentication, with a JSON-RPC answer.
      maxRequestBodySize: 2 * MCP_MESSAGE_MAX_BYTES,
      fetch: (request, server) =>
        handle(request, server, guard, clients, principals, options.token).catch((error) => {
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
      await Promise.all([clients.endAll("server shutdown"), principals.endAll()]);
    },
  };
}

async function handle(
  request: Request,
  bun: Bun.Server<undefined>,
  guard: Guard,
  clients: Clients,
  principals: Principals,
  token: string | undefined,
): Promise<Response> {
  const refusal = guard.check(request);
  if (refusal?.status === 403) return jsonError(403, -32001, refusal.message);
  // Clients that get 401 look for OAuth here and quote what they find (Claude Code shows this body and
  // hides anything that looks like a path): say plainly that there is none and what to send instead.
  if (new URL(request.url).pathname !== "/mcp") return jsonError(404, -32000, NO_OAUTH);
  if (refusal) {
    return jsonError(401, -32001, refusal.message, { "WWW-Authenticate": 'Bearer realm="repl-mcp"' });
  }
  // Event streams stay open while cells run; the SDK's keep-alive comments are the liveness signal.
  // The body read below keeps a deadline of its own.
  bun.timeout(request, 0);
  let parsedBody: unknown;
  if (request.method === "POST") {
    if (!isJsonContentType(request.headers.get("content-type"))) {
      return jsonError(415, -32000, "Content-Type must be application/json");
    }
    const body = await readJsonBody(request, MCP_MESSAGE_MAX_BYTES, HTTP_BODY_READ_TIMEOUT_MS);
    if ("status" in body) return jsonError(body.status, body.code, body.message, body.headers);
    parsedBody = body.json;
    // server/discover exists only in 2026-07-28: without its envelope it is a broken 2026 request, which
    // the 2026 side answers as such (400, -32602, its id), not a legacy request without a session.
    if (isDiscover(parsedBody) || !(await isLegacyRequest(request, parsedBody))) {
      const response = await principals.serve(request, parsedBody, token);
      return response ?? full();
    }
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
  return (await clients.open()) ?? full();
}

function full(): Response {
  return jsonError(
    503,
    -32000,
    `The server holds its maximum of ${SESSIONS_MAX} sessions; end an MCP session or close Python sessions`,
  );
}

const NO_OAUTH =
  "Not found. This repl-mcp server has no OAuth: send its bearer token in the header " +
  "'Authorization: Bearer <token>' (claude mcp add --transport http NAME URL --header ...)";

function isDiscover(body: unknown): boolean {
  return (body as { method?: unknown } | null)?.method === "server/discover";
}

function jsonError(status: number, code: number, message: string, headers: Record<string, string> = {}) {
  return Response.json({ jsonrpc: "2.0", id: null, error: { code, message } }, { status, headers });
}
