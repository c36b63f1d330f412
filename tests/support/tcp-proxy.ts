// A TCP forwarder on loopback that a test can cut: every connection through it is dropped at once (as a
// proxy restart or a network blip would), and new ones are accepted again afterwards. Held, it also keeps
// new connections waiting (a network that is down for a while) until released. Down, it drops every new
// connection at once too (each attempt fails, as while a route or a proxy is gone) until it is up again.
import type { Socket, TCPSocketListener } from "bun";

interface Pair {
  peer: Socket<Pair> | undefined;
  pending: Uint8Array[];
}

export class TcpProxy {
  /** Connections accepted so far. */
  accepted = 0;

  /** Clients accepted while held, to be connected on release. */
  private held: (() => void)[] | undefined;
  /** Set while down: new clients are dropped as soon as they connect. */
  private refusing = false;

  private constructor(
    private readonly listener: TCPSocketListener<Pair>,
    private readonly open: Set<Socket<Pair>>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.listener.port}/`;
  }

  static start(targetPort: number): TcpProxy {
    const open = new Set<Socket<Pair>>();
    let proxy: TcpProxy | undefined;
    const listener = Bun.listen<Pair>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open(client) {
          client.data = { peer: undefined, pending: [] };
          if (proxy?.refusing) {
            client.terminate();
            return;
          }
          open.add(client);
          if (proxy) proxy.accepted++;
          const connect = () =>
            void Bun.connect<Pair>({
              hostname: "127.0.0.1",
              port: targetPort,
              socket: {
                open(upstream) {
                  upstream.data = { peer: client, pending: [] };
                  open.add(upstream);
                  client.data.peer = upstream;
                  for (const chunk of client.data.pending.splice(0)) upstream.write(chunk);
                },
                data(upstream, chunk) {
                  upstream.data.peer?.write(chunk);
                },
                close(upstream) {
                  open.delete(upstream);
                  upstream.data.peer?.end();
                },
                error(upstream) {
                  upstream.data.peer?.end();
                },
              },
            }).catch(() => client.end());
          if (proxy?.held) proxy.held.push(connect);
          else connect();
        },
        data(client, chunk) {
          if (client.data.peer) client.data.peer.write(chunk);
          else client.data.pending.push(new Uint8Array(chunk));
        },
        close(client) {
          open.delete(client);
          client.data.peer?.end();
        },
        error(client) {
          client.data.peer?.end();
        },
      },
    });
    proxy = new TcpProxy(listener, open);
    return proxy;
  }

  /** Drops every connection now. */
  cut(): void {
    for (const socket of this.open) socket.terminate();
    this.open.clear();
  }

  /** Drops every connection now and keeps new ones waiting until `release`. */
  hold(): void {
    this.held ??= [];
    this.cut();
  }

  /** Drops every connection now, and every new one as it comes, until `up`. */
  down(): void {
    this.refusing = true;
    this.cut();
  }

  /** Lets new connections through again after `down`. */
  up(): void {
    this.refusing = false;
  }

  /** Connects the connections that waited, and new ones from now on. */
  release(): void {
    const waiting = this.held ?? [];
    this.held = undefined;
    for (const connect of waiting) connect();
  }

  stop(): void {
    this.held = undefined;
    this.cut();
    this.listener.stop(true);
  }
}
