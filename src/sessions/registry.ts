// All sessions of this server. Today that is the default session, created at startup for the launch
// directory; routing by session_id already follows the contract so opened sessions slot in later.
import { randomUUID } from "node:crypto";
import { ProtocolError } from "../errors.ts";
import type { Interpreter } from "./interpreter.ts";
import { Session } from "./session.ts";

export const SESSION_NOT_FOUND = "Session not found or closed; open a new session";

export class Sessions {
  readonly serverId = randomUUID();
  readonly default: Session;
  private readonly byId = new Map<string, Session>();

  constructor(options: { project: string; interpreter: Interpreter; maxMemoryMib: number }) {
    this.default = new Session({ serverId: this.serverId, name: "default", ...options });
    this.byId.set(this.default.id, this.default);
  }

  /** The session a routed tool addresses; omitted → the default session. */
  route(sessionId: string | undefined): Session {
    if (sessionId === undefined) return this.default;
    const session = this.byId.get(sessionId);
    if (!session) throw new ProtocolError(SESSION_NOT_FOUND);
    return session;
  }

  list(): Session[] {
    return [...this.byId.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.list().map((session) => session.supervisor.shutdown()));
  }
}
