// One error type for the whole product. `code` is stable and machine-readable; `message` is written
// for an agent to act on. Protocol errors become JSON-RPC errors; every other failure becomes an
// isError tool result.

export const ErrorCode = {
  /** JSON-RPC "invalid params": bad arguments, unknown tool, unknown session. */
  InvalidParams: -32602,
} as const;

export class ReplError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ReplError";
  }
}

/** A failure the client caused at the protocol level; answered as a JSON-RPC error, not a tool result. */
export class ProtocolError extends Error {
  // The SDK copies `code` and `message` of a thrown error into the JSON-RPC error object.
  readonly code = ErrorCode.InvalidParams;
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
