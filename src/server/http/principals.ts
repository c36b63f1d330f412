// The 2026-07-28 side of the HTTP transport. That revision is stateless: there is no Mcp-Session-Id and
// every POST is answered by a fresh SDK server instance, so what a client may see cannot hang on a
// transport session. It hangs on who is asking: the principal, named by the bearer token that passed the
// guard (or one anonymous principal when the server runs without a token). Each principal has one
// context (its SessionScope: a default session and the sessions it opened, and its task board), found
// again by every request with the same token; session ids (random UUIDs) are then capabilities within
// that scope, and another principal's ids are unknown to it. A principal with nothing running is ended
// after the idle timeout, like a legacy MCP session.
import { createHash } from "node:crypto";
import { createMcpHandler, type McpHttpHandler } from "@modelcontextprotocol/server";
import { describe, JSONRPC_METHOD_NOT_FOUND } from "../../errors.ts";
import { HTTP_SSE_BACKLOG_MAX_BYTES, MCP_MESSAGE_MAX_BYTES } from "../../limits.ts";
import { log } from "../../log.ts";
import type { Sessions } from "../../sessions/registry.ts";
import { SessionScope } from "../../sessions/scope.ts";
import { clientContext, createServer, MODERN_REQUESTS } from "../server.ts";
import type { ClientSettings, ServerContext } from "../tools/tool.ts";
import { Backlog, withBoundedStream } from "./backlog.ts";
import { sweepIdle } from "./idle.ts";

interface Principal {
  key: string;
  context: ServerContext;
  /** One budget for the event streams of all its requests. */
  backlog: Backlog;
  lastSeen: number;
  ending?: Promise<void>;
}

export class Principals {
  private readonly byKey = new Map<string, Principal>();
  private readonly stopSweep: () => void;
  readonly handler: McpHttpHandler;

  constructor(
    private readonly pool: Sessions,
    private readonly settings: ClientSettings,
    idleTimeoutS: number,
  ) {
    this.stopSweep = sweepIdle(
      idleTimeoutS * 1000,
      () => this.byKey.values(),
      (principal) => principal.context.sessions.busy,
      (principal) => void this.end(principal, "idle timeout"),
    );
    this.handler = createMcpHandler(
      ({ authInfo }) => {
        // Every request reaching the handler was given its principal by `serve` below.
        const principal = this.byKey.get(authInfo?.clientId ?? "");
        if (!principal) throw new Error("a 2026-07-28 request arrived without its principal");
        return createServer(principal.context, "modern");
      },
      {
        legacy: "reject",
        maxRequestBodySize: MCP_MESSAGE_MAX_BYTES,
        onerror: (error) => log.debug(`MCP HTTP (2026-07-28): ${describe(error)}`),
      },
    );
  }

  /**
   * Serves one 2026-07-28 request for whoever holds `token` (undefined: the server has none). Undefined
   * when a new principal would need a session slot and none is free.
   */
  async serve(request: Request, body: unknown, token: string | undefined): Promise<Response | undefined> {
    const { id, method } = (body ?? {}) as { id?: unknown; method?: unknown };
    if (id !== undefined && typeof method === "string" && !MODERN_REQUESTS.has(method)) {
      const error = { code: JSONRPC_METHOD_NOT_FOUND, message: "Method not found" };
      return Response.json({ jsonrpc: "2.0", id, error }, { status: 404 });
    }
    const key = token === undefined ? "anonymous" : createHash("sha256").update(token).digest("hex");
    const principal = this.byKey.get(key) ?? this.admit(key);
    if (!principal) return undefined;
    principal.lastSeen = performance.now();
    const response = await this.handler.fetch(request, {
      parsedBody: body,
      authInfo: { token: key, clientId: key, scopes: [] },
    });
    return withBoundedStream(response, principal.backlog);
  }

  async endAll(): Promise<void> {
    this.stopSweep();
    await this.handler.close().catch(() => {});
    await Promise.all([...this.byKey.values()].map((principal) => this.end(principal, "server shutdown")));
  }

  private admit(key: string): Principal | undefined {
    let scope: SessionScope;
    try {
      scope = new SessionScope(this.pool);
    } catch {
      return undefined;
    }
    const backlog = new Backlog(HTTP_SSE_BACKLOG_MAX_BYTES, () =>
      log.warn("a 2026-07-28 client stopped reading; an event stream was cut"),
    );
    const context = clientContext(scope, this.settings);
    const principal = { key, context, backlog, lastSeen: performance.now() };
    this.byKey.set(key, principal);
    return principal;
  }

  private end(principal: Principal, why: string): Promise<void> {
    principal.ending ??= (async () => {
      this.byKey.delete(principal.key);
      log.info(`2026-07-28 client ended: ${why}`);
      await principal.context.sessions.end();
    })();
    return principal.ending;
  }
}
