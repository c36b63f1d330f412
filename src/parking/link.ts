// A server's (or `repl-mcp sessions stop`'s) connection to a keeping guardian's socket: the handshake that
// proves knowledge of the parking secret, then whole lines both ways. What the guardian relays is the
// worker's frames; what it says itself starts with GUARDIAN_LINE_PREFIX.
import type { Socket } from "bun";
import * as v from "valibot";
import { ADOPT_HANDSHAKE_TIMEOUT_MS, FRAME_MAX_BYTES } from "../limits.ts";
import { decodeLine, LineSplitter } from "../wire/lines.ts";
import { proofFor } from "./place.ts";
import { KeeperMessage } from "./protocol.ts";

export type Adopted = Extract<KeeperMessage, { guardian: "adopted" }>;

/** The guardian said no (or could not be reached): why, and who holds the worker when that is why. */
export class KeeperRefused extends Error {
  constructor(
    readonly code: "SESSION_HELD" | "WRONG_SECRET" | "ENDING" | "BAD_REQUEST" | "GONE",
    message: string,
    readonly holder: number | null = null,
  ) {
    super(message);
    this.name = "KeeperRefused";
  }
}

interface State {
  link: KeeperLink;
}

export class KeeperLink {
  private readonly splitter = new LineSplitter(FRAME_MAX_BYTES);
  /** Lines that came after the handshake, before anyone listened. */
  private early: Uint8Array[] = [];
  private onLine: ((line: Uint8Array) => void) | undefined;
  private handshake:
    | { resolve: (message: KeeperMessage) => void; reject: (error: Error) => void; hello: boolean }
    | undefined;
  private closeListeners: (() => void)[] = [];
  private isClosed = false;
  private queue: { bytes: Uint8Array; done: () => void }[] = [];
  /** Resolves when the connection is closed, whoever closed it. */
  readonly closed: Promise<void>;
  private resolveClosed!: () => void;

  private socket!: Socket<State>;

  private constructor(private readonly secret: string) {
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
  }

  /**
   * Connects and asks the guardian to hand the worker over (`adopt`, answered by its `adopted` message)
   * or to end it (`end`). Throws KeeperRefused when it says no, is gone, or does not answer in time.
   */
  static async open(
    path: string,
    secret: string,
    request: { adopt: number } | { end: number },
  ): Promise<{ link: KeeperLink; answer: KeeperMessage }> {
    const link = new KeeperLink(secret);
    const answer = link.shake(request);
    answer.catch(() => {});
    try {
      link.socket = await Bun.connect<State>({
        unix: path,
        data: { link },
        socket: {
          data: (socket, chunk) => socket.data.link.received(chunk),
          drain: (socket) => socket.data.link.drain(),
          close: (socket) => socket.data.link.gone(),
          error: (socket) => socket.data.link.gone(),
        },
      });
    } catch (error) {
      link.gone();
      throw new KeeperRefused("GONE", `its guardian does not answer (${(error as Error).message})`);
    }
    return { link, answer: await answer };
  }

  private shake(request: { adopt: number } | { end: number }): Promise<KeeperMessage> {
    const answer = new Promise<KeeperMessage>((resolve, reject) => {
      this.handshake = { resolve, reject, hello: false };
    });
    const timer = setTimeout(() => {
      this.handshake?.reject(new KeeperRefused("GONE", "its guardian did not answer in time"));
      this.close();
    }, ADOPT_HANDSHAKE_TIMEOUT_MS);
    this.pendingRequest = request;
    return answer.finally(() => clearTimeout(timer));
  }

  private pendingRequest: { adopt: number } | { end: number } | undefined;

  private received(chunk: Uint8Array): void {
    let lines: Uint8Array[];
    try {
      lines = this.splitter.push(chunk);
    } catch {
      this.close();
      return;
    }
    for (const line of lines) {
      if (this.handshake) this.handshakeLine(line);
      else if (this.onLine) this.onLine(line);
      else this.early.push(line);
    }
  }

  private handshakeLine(line: Uint8Array): void {
    const shake = this.handshake as NonNullable<KeeperLink["handshake"]>;
    let message: KeeperMessage;
    try {
      message = v.parse(KeeperMessage, JSON.parse(decodeLine(line)));
    } catch {
      shake.reject(new KeeperRefused("BAD_REQUEST", "its guardian answered something else"));
      this.handshake = undefined;
      this.close();
      return;
    }
    if (!shake.hello) {
      if (message.guardian !== "hello") return;
      shake.hello = true;
      const request = this.pendingRequest as { adopt: number } | { end: number };
      const proof = proofFor(this.secret, message.nonce);
      this.write(
        new TextEncoder().encode(
          `${JSON.stringify(
            "adopt" in request
              ? { guardian: "adopt", proof, holder: request.adopt }
              : { guardian: "end", proof, grace_ms: request.end },
          )}\n`,
        ),
      );
      return;
    }
    this.handshake = undefined;
    if (message.guardian === "refused") {
      shake.reject(new KeeperRefused(message.code, message.message, message.holder ?? null));
      this.close();
      return;
    }
    shake.resolve(message);
  }

  /** Delivers every later line (the ones that came already first). */
  listen(onLine: (line: Uint8Array) => void): void {
    this.onLine = onLine;
    const early = this.early;
    this.early = [];
    for (const line of early) onLine(line);
  }

  onClose(fn: () => void): void {
    if (this.isClosed) queueMicrotask(fn);
    else this.closeListeners.push(fn);
  }

  get alive(): boolean {
    return !this.isClosed;
  }

  /** Bytes not yet taken by the socket, in lines waiting behind the first. */
  get backlog(): number {
    return this.queue.length;
  }

  /**
   * Writes one encoded line (or more); resolves once the socket took all of it. Lines go out whole and in
   * order; a closed connection drops them (the close is reported on its own).
   */
  write(bytes: Uint8Array): Promise<void> {
    if (this.isClosed) return Promise.reject(new Error("the guardian's connection is closed"));
    if (this.queue.length === 0) {
      const written = this.socket.write(bytes);
      if (written === bytes.length) return WRITTEN;
      if (written < 0) return Promise.reject(new Error("the guardian's connection is closed"));
      bytes = bytes.subarray(written);
    }
    return new Promise((done) => this.queue.push({ bytes, done }));
  }

  private drain(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0] as { bytes: Uint8Array; done: () => void };
      const written = this.socket.write(head.bytes);
      if (written < 0) return;
      if (written < head.bytes.length) {
        head.bytes = head.bytes.subarray(written);
        return;
      }
      this.queue.shift();
      head.done();
    }
  }

  /** Closes the connection (a guardian that holds no `end` request parks its worker). */
  close(): void {
    if (this.isClosed) return;
    this.socket.end();
    this.gone();
  }

  private gone(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.handshake?.reject(new KeeperRefused("GONE", "its guardian closed the connection"));
    this.handshake = undefined;
    for (const { done } of this.queue.splice(0)) done();
    for (const fn of this.closeListeners.splice(0)) fn();
    this.resolveClosed();
  }
}

const WRITTEN = Promise.resolve();
