// Lazy, shared connections to peers. Entries that differ only in policy (allowedTools, brokerAllowed,
// disabled) share one transport. A failed connect is remembered for a while so a broken peer is not
// hammered; only a transport that actually closed is discarded.
//
// A peer may speak either protocol era, and each transport finds out its own way:
// - stdio: `initialize` first, on the peer's own pipes. A legacy peer answers it (one round trip, as
//   before 2026); a 2026-07-28-only peer refuses it with -32022, and the same process is then spoken to
//   in the 2026 era (server/discover). No second copy of the peer is started to probe it, and a silent
//   legacy peer costs no probe timeout (the SDK's own probe does both).
// - HTTP: the SDK's negotiation, server/discover first and `initialize` when the peer does not know it.
import type { Client } from "@modelcontextprotocol/client";
import { ReplError } from "../errors.ts";
import { BROKER_CONNECT_COOLDOWN_MS, BROKER_CONNECT_MAX_MS, BROKER_LIVE_TRANSPORTS } from "../limits.ts";
import { withTimeout } from "../timeout.ts";
import { NAME, VERSION } from "../version.ts";
import type { HttpEntry, ServerEntry, StdioEntry } from "./config.ts";
import type { DirectCalls } from "./direct-calls.ts";
import type { TokenSource } from "./oauth/grants.ts";
import { ownCause, peerProblem, timedOut } from "./peer-fault.ts";

/** The error code a 2026-07-28 peer answers `initialize` with (UnsupportedProtocolVersion). */
const UNSUPPORTED_PROTOCOL_VERSION = -32022;
const MODERN = "2026-07-28";

type ClientClass = typeof Client;

export type FailureKind = "connection_timeout" | "credentials_missing" | "disconnected";

export interface ConnectFailure {
  at: number;
  kind: FailureKind;
}

export class Connection {
  closed = false;
  lastUsed = Date.now();
  /** Calls under way on it (enter/leave). */
  inUse = 0;
  /** No new call may take it; it closes when the last one under way ends (see retire). */
  private retiring = false;

  constructor(
    readonly key: string,
    readonly client: Client,
    private readonly link: Link,
    /** Present for a stdio peer in a legacy era: tools/call goes on its pipes without the SDK client. */
    private readonly direct?: DirectCalls,
  ) {}

  /** One tools/call, answered with the peer's result (errors as the SDK client's, see peer-fault.ts). */
  callTool(
    name: string,
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<Record<string, unknown>> {
    if (this.direct) return this.direct.callTool(name, args, options);
    return this.client.request(
      { method: "tools/call", params: { name, arguments: args } },
      { timeout: options.timeoutMs, signal: options.signal },
    ) as Promise<Record<string, unknown>>;
  }

  /** What the peer did wrong, if the connection failed because of it (see peerProblem). */
  get failure(): string | undefined {
    return this.link.failure();
  }

  /** A call starts on this connection. */
  enter(): void {
    this.inUse++;
  }

  /** A call on it ended; a connection retired meanwhile closes with its last one. */
  leave(): void {
    this.inUse--;
    if (this.retiring && this.inUse === 0) void this.close();
  }

  /**
   * Closes it now if no call is under way on it, else once the last one ends: those calls were accepted
   * by the peer and their answers are still coming (a 401 refused one request, not the transport).
   */
  retire(): Promise<void> {
    this.retiring = true;
    return this.inUse === 0 ? this.close() : Promise.resolve();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.client.close().catch(() => {});
    await this.link.close().catch(() => {});
  }
}

/** A connected client, what stays under it, and for a legacy stdio peer its direct tools/call. */
interface Connected {
  client: Client;
  link: Link;
  direct?: DirectCalls;
}

/** What stays under a connected client: how to end it, and why it failed if the peer broke it. */
interface Link {
  close(): Promise<void>;
  failure(): string | undefined;
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

  /**
   * Drops a connection whose peer refused our credentials: no new call takes it (the next one connects
   * anew after the cooldown), and it closes once the calls still under way on it have ended.
   */
  async refused(connection: Connection): Promise<void> {
    this.failures.set(connection.key, { at: Date.now(), kind: "credentials_missing" });
    if (this.live.get(connection.key) === connection) this.live.delete(connection.key);
    await connection.retire();
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
    const { Client } = await import("@modelcontextprotocol/client");
    let link: Link | undefined;
    let connected: Connected;
    try {
      // The SDK's timeout covers one request only; the whole connect is bounded here.
      connected = await withTimeout(
        spec.type === "stdio"
          ? connectStdio(Client, spec, (started) => {
              link = started;
            })
          : connectHttp(Client, spec, tokens, (started) => {
              link = started;
            }),
        BROKER_CONNECT_MAX_MS,
        () => {
          throw new ReplError("CONNECT_TIMEOUT", "connect timed out");
        },
      );
    } catch (error) {
      await link?.close().catch(() => {});
      const failure = connectFailure(error, link?.failure());
      this.failures.set(key, { at: Date.now(), kind: failure.kind });
      throw failure.error;
    }
    const connection = new Connection(key, connected.client, connected.link, connected.direct);
    connected.client.onclose = () => {
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
  const code = ownCause(error)?.code;
  if (code === "CONNECT_TIMEOUT" || timedOut(error)) {
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

function newClient(Client: ClientClass, modern: boolean): Client {
  return new Client(
    { name: `${NAME}-broker`, version: VERSION },
    modern ? { capabilities: {}, versionNegotiation: { mode: { pin: MODERN } } } : { capabilities: {} },
  );
}

/** A stdio peer: one process, `initialize` first, the 2026 era on the same pipes if it refuses that. */
async function connectStdio(
  Client: ClientClass,
  spec: StdioEntry,
  started: (link: Link) => void,
): Promise<Connected> {
  const { StdioPeer } = await import("./stdio-transport.ts");
  const peer = new StdioPeer(spec);
  const link = { close: () => peer.close(), failure: () => peer.failure };
  started(link);
  await peer.start();
  const legacy = newClient(Client, false);
  try {
    await legacy.connect(peer.channel(), { timeout: BROKER_CONNECT_MAX_MS, prior: { kind: "legacy" } });
    return { client: legacy, link, direct: peer.calls };
  } catch (error) {
    if ((error as { code?: unknown }).code !== UNSUPPORTED_PROTOCOL_VERSION) throw error;
  }
  const modern = newClient(Client, true);
  await modern.connect(peer.channel(), { timeout: BROKER_CONNECT_MAX_MS });
  return { client: modern, link };
}

/** A Streamable HTTP peer, in whichever era the SDK's negotiation finds. */
async function connectHttp(
  Client: ClientClass,
  spec: HttpEntry,
  tokens: TokenSource | undefined,
  started: (link: Link) => void,
): Promise<Connected> {
  const { httpTransport } = await import("./http-transport.ts");
  const transport = httpTransport(spec, tokens);
  // An HTTP transport has no failure text of its own: its errors carry what there is to say.
  const link = { close: () => transport.close(), failure: () => undefined };
  started(link);
  const client = new Client(
    { name: `${NAME}-broker`, version: VERSION },
    { capabilities: {}, versionNegotiation: { mode: "auto" } },
  );
  await client.connect(transport, { timeout: BROKER_CONNECT_MAX_MS });
  return { client, link };
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
