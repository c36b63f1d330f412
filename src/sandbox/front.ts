// A contained worker's way to the network: a Unix socket of its own that the sandbox's relays dial in
// place of the runtime's shared bridge (runtime.ts), relayed to the runtime's proxy on this host's
// loopback. Arriving here is what names the session; reading the first request is what names the
// destination. While the proxy decides a destination, the connection holds that destination's turn
// (decisions.ts), so the proxy's question about it has exactly one asker.
import type { Socket, UnixSocketListener } from "bun";
import {
  SANDBOX_RELAY_BACKLOG_BYTES,
  SANDBOX_REQUEST_HEAD_MAX_BYTES,
  SANDBOX_REQUEST_HEAD_TIMEOUT_MS,
} from "../limits.ts";
import { log } from "../log.ts";
import type { Asking, Decisions, Turn, Verdict } from "./decisions.ts";
import { type Destination, readDestination } from "./destination.ts";

/** Who is behind a front: asked about unknown hosts, told what the proxy refused. */
export interface FrontOwner {
  ask(destination: Destination): Promise<Verdict>;
  refused(destination: Destination, reason: string): void;
}

/** Bytes on their way to one socket. */
class Outbox {
  socket: Socket<Connection> | undefined;
  private readonly queue: Uint8Array[] = [];
  private queued = 0;
  private ending = false;
  /** The socket whose reading pauses while this outbox is too full. */
  source: Socket<Connection> | undefined;

  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    if (this.socket && this.queue.length === 0) {
      const written = Math.max(this.socket.write(bytes), 0);
      if (written === bytes.length) return;
      bytes = bytes.subarray(written);
    }
    this.queue.push(bytes);
    this.queued += bytes.length;
    if (this.queued > SANDBOX_RELAY_BACKLOG_BYTES) this.source?.pause();
  }

  /** Writes what waits; called when the socket opens and whenever it drains. */
  flush(): void {
    const socket = this.socket;
    if (!socket) return;
    while (this.queue.length > 0) {
      const bytes = this.queue[0] as Uint8Array;
      const written = Math.max(socket.write(bytes), 0);
      this.queued -= written;
      if (written < bytes.length) {
        this.queue[0] = bytes.subarray(written);
        return;
      }
      this.queue.shift();
    }
    this.source?.resume();
    if (this.ending) socket.end();
  }

  /** Ends the socket once everything queued has been written. */
  end(): void {
    this.ending = true;
    if (this.queue.length === 0) this.socket?.end();
  }
}

/** One proxied connection. */
class Connection implements Asking {
  destination: Destination | undefined;
  readonly allowedOnce = new Set<string>();
  closed = false;
  refusal: string | undefined;
  readonly toProxy = new Outbox();
  readonly toWorker = new Outbox();
  /** Every byte the worker sent before the destination was known, and how many went on already. */
  head = new Uint8Array(0);
  forwarded = 0;
  /** SOCKS: the proxy's short replies (greeting, login) before the one that answers the request. */
  repliesBefore = 0;
  /** Bytes of those earlier replies seen so far. */
  skipped = 0;
  socks = false;
  turn: Turn | undefined;
  answer = "";
  answered = false;
  workerEnded = false;
  proxyEnded = false;
  readonly headTimer: ReturnType<typeof setTimeout>;

  constructor(
    readonly owner: FrontOwner,
    onSilence: () => void,
  ) {
    this.headTimer = setTimeout(onSilence, SANDBOX_REQUEST_HEAD_TIMEOUT_MS);
  }

  ask(destination: Destination): Promise<Verdict> {
    return this.owner.ask(destination);
  }
}

export class ProxyFront {
  private readonly listener: UnixSocketListener<Connection>;
  private readonly connections = new Set<Connection>();

  constructor(
    readonly path: string,
    /** The runtime's proxy: its port on loopback, and the token it wants from its clients. */
    private readonly proxy: { port: number; token: string },
    private readonly owner: FrontOwner,
    private readonly decisions: Decisions,
  ) {
    this.listener = Bun.listen<Connection>({
      unix: path,
      socket: {
        open: (socket) => this.accept(socket),
        data: (socket, bytes) => this.fromWorker(socket.data, bytes),
        drain: (socket) => socket.data.toWorker.flush(),
        close: (socket) => this.ended(socket.data, "worker"),
        error: (socket) => this.ended(socket.data, "worker"),
      },
    });
  }

  /** Stops listening and ends every connection. */
  close(): void {
    this.listener.stop(true);
    for (const connection of this.connections) this.abort(connection);
  }

  private accept(socket: Socket<Connection>): void {
    const connection = new Connection(this.owner, () => {
      if (!connection.destination) this.abort(connection);
    });
    socket.data = connection;
    connection.toWorker.socket = socket;
    connection.toProxy.source = socket;
    this.connections.add(connection);
    Bun.connect<Connection>({
      hostname: "127.0.0.1",
      port: this.proxy.port,
      data: connection,
      socket: {
        open: (proxy) => {
          connection.toProxy.socket = proxy;
          connection.toWorker.source = proxy;
          if (connection.workerEnded) connection.toProxy.end();
          connection.toProxy.flush();
        },
        data: (_proxy, bytes) => this.fromProxy(connection, bytes),
        drain: () => connection.toProxy.flush(),
        close: () => this.ended(connection, "proxy"),
        error: () => this.ended(connection, "proxy"),
      },
    }).catch((error) => {
      log.warn("sandbox front: the proxy cannot be reached:", error);
      this.abort(connection);
    });
  }

  private fromWorker(connection: Connection, bytes: Uint8Array): void {
    if (connection.destination) {
      connection.toProxy.push(bytes);
      return;
    }
    if (connection.head.length === 0) connection.socks = bytes[0] === 5;
    const head = new Uint8Array(connection.head.length + bytes.length);
    head.set(connection.head);
    head.set(bytes, connection.head.length);
    connection.head = head;
    const read = readDestination(head);
    if (read.kind === "more" || read.kind === "invalid") {
      if (read.kind === "invalid" || head.length > SANDBOX_REQUEST_HEAD_MAX_BYTES) this.abort(connection);
      return;
    }
    // A SOCKS greeting and login go on at once: the client waits for their replies before it says more.
    connection.toProxy.push(this.authorized(head, connection.forwarded, read.before, read.login));
    connection.forwarded = read.before;
    connection.repliesBefore = read.repliesBefore;
    if (read.kind === "prefix") return;
    clearTimeout(connection.headTimer);
    connection.destination = read.destination;
    const request =
      read.headEnd === undefined
        ? head.subarray(read.before)
        : concat(
            withCredentials(head.subarray(0, read.headEnd), this.proxy.token),
            head.subarray(read.headEnd),
          );
    connection.head = new Uint8Array(0);
    const turn = this.decisions.queue(read.destination, connection);
    connection.turn = turn;
    void turn.ready.then(() => {
      if (connection.closed) return turn.release();
      connection.toProxy.push(request);
    });
  }

  private fromProxy(connection: Connection, bytes: Uint8Array): void {
    if (!connection.answered) this.readAnswer(connection, bytes);
    connection.toWorker.push(bytes);
  }

  /**
   * The proxy's first bytes after the request are its decision: the turn ends there, and a refusal (an
   * HTTP 403, a SOCKS reply other than success) is told to the owner with its reason.
   */
  private readAnswer(connection: Connection, bytes: Uint8Array): void {
    if (connection.socks) {
      // The replies to the greeting and the login are two bytes each; the next one answers the request.
      const earlier = connection.destination
        ? connection.repliesBefore * 2 - connection.skipped
        : bytes.length;
      if (earlier >= bytes.length) {
        connection.skipped += bytes.length;
        return;
      }
      const offset = Math.max(earlier, 0);
      connection.answered = true;
      connection.turn?.release();
      const status = bytes[offset + 1] ?? 0;
      if (status !== 0)
        this.owner.refused(connection.destination as Destination, refusalOf(connection, undefined));
      return;
    }
    if (!connection.destination) return;
    connection.answer += new TextDecoder().decode(bytes.subarray(0, 512));
    const line = /^HTTP\/1\.[01] (\d{3}) ?([^\r\n]*)\r?\n/.exec(connection.answer);
    if (!line && !connection.answer.includes("\n") && connection.answer.length < 512) return;
    connection.answered = true;
    connection.turn?.release();
    if (line?.[1] === "403") this.owner.refused(connection.destination, refusalOf(connection, line[2]));
  }

  /**
   * The bytes from `from` to `to`, a SOCKS login among them given this proxy's token. Arriving at this
   * socket is what authenticates a worker (no other sandbox can reach it), so the front presents the
   * proxy's current token whatever the worker sent: a worker an earlier server started (adopted after it
   * was parked) knows only that server's token.
   */
  private authorized(
    head: Uint8Array,
    from: number,
    to: number,
    login: { start: number; end: number } | undefined,
  ) {
    if (!login || login.end <= from || login.start >= to) return head.subarray(from, to);
    const user = head.subarray(login.start + 2, login.start + 2 + (head[login.start + 1] as number));
    const token = new TextEncoder().encode(this.proxy.token);
    const message = concat(Uint8Array.of(1, user.length), user, Uint8Array.of(token.length), token);
    return concat(head.subarray(from, login.start), message, head.subarray(login.end, to));
  }

  /** One side ended: the other ends once what it was sent has gone. */
  private ended(connection: Connection, side: "worker" | "proxy"): void {
    if (side === "worker") {
      connection.workerEnded = true;
      connection.toProxy.end();
    } else {
      connection.proxyEnded = true;
      connection.toWorker.end();
    }
    if (connection.workerEnded && connection.proxyEnded) this.forget(connection);
    else if (side === "worker" && !connection.toProxy.socket) this.forget(connection);
  }

  private abort(connection: Connection): void {
    connection.toWorker.socket?.end();
    connection.toProxy.socket?.end();
    this.forget(connection);
  }

  private forget(connection: Connection): void {
    if (connection.closed) return;
    connection.closed = true;
    clearTimeout(connection.headTimer);
    connection.turn?.release();
    this.decisions.closed(connection);
    this.connections.delete(connection);
  }
}

/**
 * Why the proxy refused: the person's answer when they were asked, else the runtime's reason (the status
 * phrase of a refused CONNECT, the first line of a refused request's body).
 */
function refusalOf(connection: Connection, phrase: string | undefined): string {
  if (connection.refusal) return connection.refusal;
  if (phrase && phrase !== "Forbidden") return phrase;
  const body = connection.answer
    .split(/\r?\n\r?\n/)[1]
    ?.split(/\r?\n/)[0]
    ?.trim();
  return body || "not allowed by the sandbox policy";
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((size, part) => size + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * An HTTP request head with the proxy's token for credentials, under the user name the worker gave (the
 * runtime's attribution key) or a name of our own.
 */
function withCredentials(head: Uint8Array, token: string): Uint8Array {
  const text = new TextDecoder().decode(head);
  const lines = text.split(/\r?\n/);
  let user = "repl-mcp";
  const kept = lines.filter((line) => {
    const match = /^proxy-authorization:\s*basic\s+(\S+)/i.exec(line);
    if (!match) return !/^proxy-authorization:/i.test(line);
    const decoded = Buffer.from(match[1] as string, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon > 0) user = decoded.slice(0, colon);
    return false;
  });
  // kept ends with the two empty strings of the blank line; the header goes before them.
  const credentials = Buffer.from(`${user}:${token}`).toString("base64");
  kept.splice(Math.max(1, kept.length - 2), 0, `Proxy-Authorization: Basic ${credentials}`);
  return new TextEncoder().encode(kept.join("\r\n"));
}
