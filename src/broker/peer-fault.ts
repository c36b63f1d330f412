// Failures a peer itself caused (invalid output, a redirect, input it stopped reading), described in
// our own words: never anything the peer sent, which may echo credentials.
import type { SdkErrorCode } from "@modelcontextprotocol/client";
import { ReplError } from "../errors.ts";

/** The code of the SDK client's error for a request that got no answer within its timeout. */
const REQUEST_TIMEOUT = "REQUEST_TIMEOUT" satisfies `${SdkErrorCode.RequestTimeout}`;

/** Whether a request failed because its own timeout passed (not because the peer answered). */
export function timedOut(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === REQUEST_TIMEOUT;
}

/** The error of a request the broker sent itself (direct-calls.ts) whose timeout passed, as timedOut() knows it. */
export function requestTimedOut(): Error {
  return Object.assign(new Error("MCP request timed out"), { code: REQUEST_TIMEOUT });
}

export class PeerFault extends ReplError {
  constructor(message: string) {
    super("MCP_PROTOCOL", message);
    this.name = "PeerFault";
  }
}

/** What the peer did wrong, from the error or the reason its transport recorded; else undefined. */
export function peerProblem(error: unknown, failure: string | undefined): string | undefined {
  // The SDK may wrap what our fetch or transport threw (its negotiation does): look through causes.
  const own = ownCause(error);
  return own instanceof PeerFault ? own.message : failure;
}

/** Our own error behind an SDK error, if one of its causes is ours (what our fetch or transport threw). */
export function ownCause(error: unknown): ReplError | undefined {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; depth++) {
    if (cause instanceof ReplError) return cause;
    cause = cause.cause;
  }
  return undefined;
}
