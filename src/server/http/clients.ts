// The legacy side of the HTTP transport (2024-11-05 … 2025-11-25): MCP sessions, each with its own SDK
// transport, MCP server and SessionScope (its own default session, the sessions it opened, its tasks).
// One ends on DELETE, after its idle timeout, when its slot is needed and it has nothing to lose, or at
// shutdown; ending it closes its Python sessions and stops their workers.
import { randomUUID } from "node:crypto";
import { type Server, WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server";
import { describe } from "../../errors.ts";
import { HTTP_SSE_BACKLOG_MAX_BYTES, MCP_MESSAGE_MAX_BYTES } from "../../limits.ts";
import { log } from "../../log.ts";
import type { Sessions } from "../../sessions/registry.ts";
import { SessionScope } from "../../sessions/scope.ts";
import { clientContext, createServer } from "../server.ts";
import type { ClientSettings } from "../tools/tool.ts";
import { Backlog } from "./backlog.ts";
import { sweepIdle } from "./idle.ts";

export interface Client {
  id: string | undefined;
  server: Server;
  transport: WebStandardStreamableHTTPServerTransport;
  scope: SessionScope;
  backlog: Backlog;
  lastSeen: number;
  ending?: Promise<void>;
}

export class Clients {
  private readonly byId = new Map<string, Client>();
  private readonly stopSweep: () => void;

  constructor(
    private readonly pool: Sessions,
    private readonly settings: ClientSettings,
    idleTimeoutS: number,
  ) {
    this.stopSweep = sweepIdle(
      idleTimeoutS * 1000,
      () => this.byId.values(),
      (client) => client.scope.busy,
      (client) => void this.end(client, "idle timeout"),
    );
  }

  get(id: string): Client | undefined {
    return this.byId.get(id);
  }

  /** A new, not yet initialized client; undefined when every session slot holds one that ran Python. */
  async open(): Promise<Client | undefined> {
    const scope = this.newScope() ?? ((await this.evictPristine()) ? this.newScope() : undefined);
    if (!scope) return undefined;
    const client = { id: undefined, scope, lastSeen: performance.now() } as Partial<Client> as Client;
    client.backlog = new Backlog(HTTP_SSE_BACKLOG_MAX_BYTES, () =>
      log.warn(`MCP session ${client.id}: the client stopped reading; an event stream was cut`),
    );
    client.transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      maxRequestBodySize: MCP_MESSAGE_MAX_BYTES,
      onsessioninitialized: (id) => {
        client.id = id;
        this.byId.set(id, client);
      },
      // The DELETE is answered once this resolves: its workers are gone by then.
      onsessionclosed: () => this.end(client, "the client sent DELETE"),
    });
    client.server = createServer(clientContext(scope, this.settings), "legacy");
    await client.server.connect(client.transport);
    return client;
  }

  end(client: Client, why: string): Promise<void> {
    client.ending ??= (async () => {
      if (client.id !== undefined) this.byId.delete(client.id);
      log.info(`MCP session ${client.id ?? "(uninitialized)"} ended: ${why}`);
      await client.server.close().catch((error) => log.warn("closing an MCP session:", describe(error)));
      await client.scope.end();
    })();
    return client.ending;
  }

  async endAll(why: string): Promise<void> {
    this.stopSweep();
    await Promise.all([...this.byId.values()].map((client) => this.end(client, why)));
  }

  private newScope(): SessionScope | undefined {
    try {
      return new SessionScope(this.pool);
    } catch {
      return undefined;
    }
  }

  // Clients that initialize and vanish without DELETE would otherwise hold every slot until their idle
  // timeout. One with nothing to lose (SessionScope.pristine) gets 404 and simply initializes again.
  private async evictPristine(): Promise<boolean> {
    let oldest: Client | undefined;
    for (const client of this.byId.values()) {
      if (client.scope.pristine && (!oldest || client.lastSeen < oldest.lastSeen)) oldest = client;
    }
    if (oldest) await this.end(oldest, "its slot was needed and it had nothing to lose");
    return oldest !== undefined;
  }
}
