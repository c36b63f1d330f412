// The runtime's proxy asks "may this connection go to host:port?" without saying whose connection it is.
// Every connection reaches it through a front (front.ts) that knows its session, so the fronts take turns
// per destination: while one connection's request to a destination is being decided, no other one to the
// same destination is sent on, and the question is that connection's. A later request on a connection
// kept open (plain HTTP) is the question of the one connection already open to that destination.

import { type Destination, destinationKey } from "./destination.ts";
import type { AskAnswer } from "./runtime.ts";

export type { Destination } from "./destination.ts";

/** What the person (or the session's grants) said about one destination. */
export type Verdict = "allow_once" | "allow_session" | { deny: string };

/** A connection as the decisions see it. */
export interface Asking {
  destination: Destination | undefined;
  readonly allowedOnce: Set<string>;
  readonly closed: boolean;
  /** Why the last question about it was answered with a refusal (the result's denial names it). */
  refusal?: string;
  /** Asks on behalf of the connection's session. */
  ask(destination: Destination): Promise<Verdict>;
}

export interface Turn {
  /** Resolves when this connection's request may go to the proxy. */
  readonly ready: Promise<void>;
  /** Ends the turn (idempotent): the next connection to the same destination goes on. */
  release(): void;
}

interface Queued {
  asking: Asking;
  start: () => void;
  released: boolean;
}

const NOBODY = "no connection of a contained session is waiting for this destination";

export class Decisions {
  private readonly queues = new Map<string, Queued[]>();
  /** Connections whose destination is known, for the requests that follow the first on one connection. */
  private readonly open = new Set<Asking>();

  queue(destination: Destination, asking: Asking): Turn {
    const key = destinationKey(destination.host, destination.port);
    const queue = this.queues.get(key) ?? [];
    this.queues.set(key, queue);
    let start!: () => void;
    const ready = new Promise<void>((resolve) => {
      start = resolve;
    });
    const entry: Queued = { asking, start, released: false };
    queue.push(entry);
    this.open.add(asking);
    if (queue.length === 1) start();
    return {
      ready,
      release: () => {
        if (entry.released) return;
        entry.released = true;
        const index = queue.indexOf(entry);
        if (index >= 0) queue.splice(index, 1);
        if (index === 0) queue[0]?.start();
        if (queue.length === 0) this.queues.delete(key);
      },
    };
  }

  /** Forgets a connection that closed. */
  closed(asking: Asking): void {
    this.open.delete(asking);
  }

  /** The runtime's ask callback: whose turn it is decides who is asked. */
  async decide(target: { host: string; port?: number }): Promise<AskAnswer> {
    const key = destinationKey(target.host, target.port);
    const asking = this.current(key) ?? this.onlyOpen(key);
    if (!asking) return { allow: false, reason: NOBODY };
    if (asking.allowedOnce.has(key)) return true;
    const destination = asking.destination as Destination;
    const verdict = await asking.ask({
      ...destination,
      host: target.host,
      port: target.port ?? destination.port,
    });
    if (verdict === "allow_once") {
      asking.allowedOnce.add(key);
      return true;
    }
    if (verdict === "allow_session") return true;
    asking.refusal = verdict.deny;
    return { allow: false, reason: verdict.deny };
  }

  private current(key: string): Asking | undefined {
    const first = this.queues.get(key)?.[0];
    return first && !first.released ? first.asking : undefined;
  }

  private onlyOpen(key: string): Asking | undefined {
    let found: Asking | undefined;
    for (const asking of this.open) {
      if (asking.closed || !asking.destination) continue;
      if (destinationKey(asking.destination.host, asking.destination.port) !== key) continue;
      if (found) return undefined;
      found = asking;
    }
    return found;
  }
}
