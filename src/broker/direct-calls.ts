// tools/call requests the broker writes on a legacy stdio peer's pipes itself, beside the SDK client that
// connected the peer and still does everything else on them (tools/list, the peer's own requests and
// notifications). Why: on the brokered call's path, the SDK 2.x client's request machinery (its era
// codec, a result-validator probe that builds and formats a schema error on every request, several schema
// checks on every incoming message) measured about a quarter of the whole call, and a legacy tools/call
// needs none of it. A 2026-07-28 peer (per-request envelope, result types) and HTTP peers keep the SDK.
//
// Our ids are strings with a prefix of their own, so they never meet the SDK client's numeric ones. A
// request given up (its deadline, the caller's cancellation) tells the peer with notifications/cancelled,
// as the SDK does; a late answer to it is dropped.
import { type JSONRPCMessage, parseCallToolResult } from "../wire/jsonrpc.ts";
import { requestTimedOut } from "./peer-fault.ts";

const ID_PREFIX = "repl-mcp-";

interface Pending {
  answer(message: JSONRPCMessage): void;
  fail(error: Error): void;
}

export class DirectCalls {
  private readonly pending = new Map<string, Pending>();
  private next = 0;
  private closedWith: Error | undefined;

  constructor(private readonly send: (message: JSONRPCMessage) => Promise<void>) {}

  /** Takes an answer to one of our requests; false for every other message (the SDK client's). */
  take(message: JSONRPCMessage): boolean {
    if ("method" in message) return false;
    const id = (message as { id?: unknown }).id;
    if (typeof id !== "string" || !id.startsWith(ID_PREFIX)) return false;
    this.pending.get(id)?.answer(message);
    return true;
  }

  /** The peer is gone: every request still waiting fails with `error`, and later ones at once. */
  close(error: Error): void {
    this.closedWith ??= error;
    for (const pending of [...this.pending.values()]) pending.fail(error);
  }

  async callTool(
    name: string,
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<Record<string, unknown>> {
    const result = parseCallToolResult(await this.request("tools/call", { name, arguments: args }, options));
    if (!result) throw new Error("MCP peer returned a tools/call result that does not follow the protocol");
    return result;
  }

  private request(
    method: string,
    params: Record<string, unknown>,
    { timeoutMs, signal }: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<unknown> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    if (signal?.aborted) return Promise.reject(new Error("MCP request cancelled before it was sent"));
    const id = `${ID_PREFIX}${++this.next}`;
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.pending.delete(id);
      };
      const giveUp = (error: Error, reason: string) => {
        done();
        this.send({
          jsonrpc: "2.0",
          method: "notifications/cancelled",
          params: { requestId: id, reason },
        }).catch(() => {});
        reject(error);
      };
      const onAbort = () => giveUp(new Error("MCP request cancelled"), "The client cancelled the request");
      const timer = setTimeout(() => giveUp(requestTimedOut(), "The request timed out"), timeoutMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(id, {
        answer: (message) => {
          done();
          if ("result" in message) resolve(message.result);
          // The peer's own words may echo what it was sent: the broker reports the failure in its own.
          else reject(new Error("MCP peer answered the request with a JSON-RPC error"));
        },
        fail: (error) => {
          done();
          reject(error);
        },
      });
      this.send({ jsonrpc: "2.0", id, method, params } as JSONRPCMessage).catch((error: Error) => {
        done();
        reject(error);
      });
    });
  }
}
