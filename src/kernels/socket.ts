// The WebSocket class the Jupyter services open a kernel's channels with (jupyter.ts): Bun's, given our
// Authorization header (Bun's WebSocket takes headers as an option), answering every message at once with
// a pong (docs/kernels.md, "Speed"), dropping a message over KERNEL_MESSAGE_MAX_BYTES unread, and
// reporting a socket that ends before it opened to the link watching its connection, in place of the
// services' own handling (reconnect.ts says why).
import { KERNEL_MESSAGE_MAX_BYTES } from "../limits.ts";

/** The WebSockets of one kernel connection, as they report to the link that watches them. */
export interface SocketWatch {
  /** The socket of the attempt under way (undefined once that attempt is given up). */
  latest: WebSocket | undefined;
  /** A socket that closed before it opened. */
  failed: (socket: WebSocket) => void;
}

/**
 * The class for one Jupyter server; `watches` holds each connection's watch by its client id (the
 * session_id in the socket's URL).
 */
export function socketClass(
  headers: Record<string, string>,
  promptAck: boolean,
  watches: Map<string, SocketWatch>,
): typeof WebSocket {
  class AuthorizedSocket extends WebSocket {
    private opened = false;

    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, { protocols, headers } as unknown as string[]);
      if (promptAck) this.addEventListener("message", () => (this as unknown as { pong(): void }).pong());
      const watch = watches.get(new URL(url).searchParams.get("session_id") ?? "");
      if (watch) watch.latest = this;
      this.addEventListener("open", () => {
        this.opened = true;
      });
      let reported = false;
      const failed = () => {
        if (this.opened || reported) return;
        reported = true;
        watch?.failed(this);
      };
      this.addEventListener("error", failed);
      this.addEventListener("close", failed);
    }

    // Before it opened, a socket's end is an attempt that failed, which the link's reconnector handles;
    // after, the services see it as a drop (and make their first attempt at once).
    override set onclose(handler: ((event: CloseEvent) => void) | null) {
      super.onclose = handler
        ? (event: CloseEvent) => {
            if (this.opened) handler(event);
          }
        : null;
    }

    override set onerror(handler: ((event: Event) => void) | null) {
      super.onerror = handler
        ? (event: Event) => {
            if (this.opened) handler(event);
          }
        : null;
    }

    // A message over the bound is dropped before the services parse it. Ours (one frame each) are far
    // smaller; a bigger one is another client's output on a shared kernel's broadcast channel.
    override set onmessage(handler: ((event: MessageEvent) => void) | null) {
      super.onmessage = handler
        ? (event: MessageEvent) => {
            if (messageBytes(event.data) > KERNEL_MESSAGE_MAX_BYTES) return;
            handler(event);
          }
        : null;
    }
  }
  // The services construct it with protocols only, never with Bun's options object.
  return AuthorizedSocket as unknown as typeof WebSocket;
}

function messageBytes(data: unknown): number {
  if (typeof data === "string") return data.length * 3;
  if (data instanceof ArrayBuffer) return data.byteLength;
  return ArrayBuffer.isView(data) ? data.byteLength : 0;
}
