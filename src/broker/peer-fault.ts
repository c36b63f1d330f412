// Failures a peer itself caused (invalid output, a redirect, input it stopped reading), described in
// our own words: never anything the peer sent, which may echo credentials.
import { ReplError } from "../errors.ts";

export class PeerFault extends ReplError {
  constructor(message: string) {
    super("MCP_PROTOCOL", message);
    this.name = "PeerFault";
  }
}

/** What the peer did wrong, from the error or the reason its transport recorded; else undefined. */
export function peerProblem(error: unknown, failure: string | undefined): string | undefined {
  if (error instanceof PeerFault) return error.message;
  return failure;
}
