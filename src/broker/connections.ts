// Lazy, shared connections to peers. Entries that differ only in policy (allowedTools, brokerAllowed,
// disabled) share one transport. A failed connect is remembered for a while so a broken peer is not
// hammered; only a transport that actually closed is discarded.

import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { REQUEST_TIMEOUT, ReplError } from "../errors.ts";
import { BROKER_CONNECT_COOLDOWN_MS, BROKER_CONNECT_MAX_MS, BROKER_LIVE_TRANSPORTS } from "../limits.ts";
import { withTimeout } from "../timeout.ts";
import { NAME, VERSION } from "../version.ts";
import type { HttpEntry, ServerEntry } from "./config.ts";
import type { TokenSource } from "./oauth/grants.ts";
import { peerProblem } from "./peer-fault.ts";

export type FailureKind = "connection_timeout" | "credentials_missing" | "disconnected";

export interface ConnectFailure {
  at: number;
  kind: FailureKind;
}

export class Connection {
  closed = false;
  lastUsed = Date.now();
  inUse = 0;

  constructor(
    readonly key: string,
    readonly client: Client,
    private readonly transport: Transport,
  ) {}

  /** What the peer did wrong, if the connection failed because of it (see peerProblem). */
  get failure(): string | undefined {
    return (this.transport as { failure?: string }).failure;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.client.close().catch(() => {});
    await this.transport.close().catch(() => {});
  }
}

const keys = new WeakMap<ServerEntry, string>();

/** The identity of an entry's transport; entries are immutable, so it is computed once per entry. */
export function transportKey(entry: ServerEntry): string {
  let key = keys.get(entry);
  if (key === undefined) {
    key = JSON.stringify(entry.transport);
    keys.set(entry, key);
  }
  return key;
}

export class ConnectionPool {
  private readonly live = new Map<string, Connection>();
  private readonly pending = new Map<string, Promise<Connection>>();
  private readonly failures = new Map<string, ConnectFailure>();

  get liveCount(): number {
    return this.live.size;
  }

  isLive(entry: ServerEntry): boolean {
    const connection = this.live.get(transportKey(entry));
    return connection !== undefined && !connection.closed;
  }

  lastFailure(entry: ServerEntry): ConnectFailure | undefined {
    return this.failures.get(transportKey(entry));
  }

  async get(entry: ServerEntry, deadline: number, signal?: AbortSignal): Promise<Connection> {
    const key = transportKey(entry);
    const existing = this.live.get(key);
    if (existing && !existing.closed) {
      existing.lastUsed = Date.now();
      return existing;
    }
    const failure = this.failures.get(key);
    if (failure && Date.now() - failure.at < BROKER_CONNECT_COOLDOWN_MS) {
      throw new ReplError(
        "CONNECT_FAILED",
        "MCP connection recently failed; verify configuration then mcp.refresh() to retry",
      );
    }
    // One attempt per transport, with its own deadline and no caller's signal: a caller that gives up
    // (or is cancelled) must not fail the attempt another session is waiting on.
    let connecting = this.pending.get(key);
    if (!connecting) {
      connecting = this.connect(key, entry).finally(() => this.pending.delete(key));
      connecting.catch(() => {});
      this.pending.set(key, connecting);
    }
    return waitAsCaller(connecting, deadline, signal);
  }

  /**
   * Closes transports no entry uses any more. Failures of transports still configured are kept unless
   * `forgetFailures` (an explicit refresh); the others are dropped with their entries.
   */
  async retain(keys: Set<string>, forgetFailures: boolean): Promise<void> {
    for (const key of [...this.failures.keys()]) {
      if (forgetFailures || !keys.has(key)) this.failures.delete(key);
    }
    const stale = [...this.live.values()].filter((connection) => !keys.has(connection.key));
    for (const connection of stale) this.live.delete(connection.key);
    await Promise.all(stale.map((connection) => connection.close()));
  }

  async closeAll(): Promise<void> {
    const all = [...this.live.values()];
    this.live.clear();
    await Promise.all(all.map((connection) => connection.close()));
  }

  private async connect(key: string, entry: ServerEntry): Promise<Connection> {
    const spec = entry.transport;
    const tokens = spec.type === "http" && spec.oauth ? await this.oauthToken(key, spec) : undefined;
    // The client side of the SDK (and the HTTP stack) loads only once a cell first uses the broker.
    const [{ Client }, transport] = await Promise.all([
      import("@modelcontextprotocol/sdk/client/index.js"),
      spec.type === "stdio"
        ? import("./stdio-transport.ts").then(({ GuardedStdioTransport }) => new GuardedStdioTransport(spec))
        : import("./http-transport.ts").then(({ httpTransport }) => httpTransport(spec, tokens)),
    ]);
    const client = new Client({ name: `${NAME}-broker`, version: VERSION }, { capabilities: {} });
    try {
      // The SDK's timeout covers initialize only; starting the transport is bounded here too.
      await withTimeout(
        client.connect(transport, { timeout: BROKER_CONNECT_MAX_MS }),
        BROKER_CONNECT_MAX_MS,
        () => {
          throw new ReplError("CONNECT_TIMEOUT", "connect timed out");
        },
      );
    } catch (error) {
      await transport.close().catch(() => {});
      const failure = connectFailure(error, (transport as { failure?: string }).failure);
      this.failures.set(key, { at: Date.now(), kind: failure.kind });
      throw failure.error;
    }
    const connection = new Connection(key, client, transport);
    client.onclose = () => {
      connection.closed = true;
      if (this.live.get(key) === connection) this.live.delete(key);
    };
    this.live.set(key, connection);
    await this.evictIdle();
    return connection;
  }

  /** An OAuth entry's token source, with a first token in hand before the transport starts. */
  private async oauthToken(key: string, spec: HttpEntry): Promise<TokenSource> {
    const { tokenSource } = await import("./oauth/grants.ts");
    const tokens = tokenSource(spec) as TokenSource;
    try {
      await tokens.accessToken();
    } catch (error) {
      this.failures.set(key, { at: Date.now(), kind: "credentials_missing" });
      throw error instanceof ReplError
        ? error
        : new ReplError(
            "CREDENTIALS_MISSING",
            "OAuth credentials could not be obtained; check the oauth entry",
          );
    }
    return tokens;
  }

  private async evictIdle(): Promise<void> {
    while (this.live.size > BROKER_LIVE_TRANSPORTS) {
      const idle = [...this.live.values()]
        .filter((c) => c.inUse === 0)
        .sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (!idle) return;
      this.live.delete(idle.key);
      await idle.close();
    }
  }
}

/** What a failed connect means, from the error's code (never from its wording, which peers control). */
function connectFailure(
  error: unknown,
  transportFailure: string | undefined,
): { kind: FailureKind; error: ReplError } {
  const problem = peerProblem(error, transportFailure);
  if (problem) {
    const message = `MCP connection failed: ${problem}; fix the entry, then mcp.refresh()`;
    return { kind: "disconnected", error: new ReplError("CONNECT_FAILED", message, { cause: error }) };
  }
  const code = error instanceof ReplError ? error.code : undefined;
  if (code === "CONNECT_TIMEOUT" || (error as { code?: unknown })?.code === REQUEST_TIMEOUT) {
    return {
      kind: "connection_timeout",
      error: new ReplError(
        "CONNECT_TIMEOUT",
        "MCP connection timed out; check the server command or URL, then mcp.refresh()",
        { cause: error },
      ),
    };
  }
  if (code === "CREDENTIALS_MISSING") {
    return {
      kind: "credentials_missing",
      error: new ReplError(
        "CREDENTIALS_MISSING",
        "MCP server requires credentials; configure them in the registry, then mcp.refresh()",
        { cause: error },
      ),
    };
  }
  return {
    kind: "disconnected",
    error: new ReplError(
      "CONNECT_FAILED",
      "MCP connection failed; check the server command or URL, then mcp.refresh()",
      { cause: error },
    ),
  };
}

/** Waits for a shared attempt within one caller's own deadline and cancellation. */
function waitAsCaller<T>(attempt: Promise<T>, deadline: number, signal?: AbortSignal): Promise<T> {
  const cancelled = () => new ReplError("CANCELLED", "MCP call cancelled while connecting; nothing was sent");
  if (signal?.aborted) return Promise.reject(cancelled());
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(cancelled());
  });
  signal?.addEventListener("abort", onAbort, { once: true });
  return withTimeout(Promise.race([attempt, aborted]), deadline - Date.now(), () => {
    throw new ReplError("DEADLINE_EXCEEDED", "MCP deadline exceeded while connecting; nothing was sent");
  }).finally(() => signal?.removeEventListener("abort", onAbort));
}
