// One error type for the whole product. `code` is one of a closed set of names an agent can branch on
// (it is published as `error_code` next to the message in every isError result); `message` is written
// for an agent to act on. Protocol errors become JSON-RPC errors; every other failure becomes an isError
// tool result.
import * as v from "valibot";

export const ERROR_CODES = [
  // Arguments and limits
  "INVALID_ARGUMENT", //         an argument is well-typed but unusable (e.g. arguments that are not an object)
  "LIMIT_EXCEEDED", //           a size, count or range limit; the message names the limit
  // Sessions and runs
  "SESSION_BUSY", //             a cell is already running in the session
  "SESSION_CLOSED", //           the session was closed (before or during the request)
  "SESSION_NOT_FOUND", //        no open session has that id
  "SESSION_LIMIT", //            too many sessions, or too many being opened at once
  "DEFAULT_SESSION", //          the default session cannot be closed
  "STATE_CHANGED", //            expected_generation no longer matches the worker
  "RUN_NOT_FOUND", //            no retained or active run has that id
  "NO_ACTIVE_RUN", //            nothing to cancel
  "SESSION_HELD", //             a kept session of that name and project is held by another live server
  "SESSION_PARKED", //           the cell's server is gone (the session is parked): nothing brokered, nobody asked
  "PROJECT_INVALID", //          the project directory is missing or not a directory
  "FILE_NOT_FOUND", //           a file to run is missing or not a regular file
  // Python
  "PYTHON_NOT_FOUND", //         no usable interpreter at the given place, on PATH or in .venv
  "PYTHON_UNSUPPORTED", //       not CPython, or older than 3.10
  "PROBE_FAILED", //             the interpreter probe timed out or misbehaved
  "WORKER_START_FAILED", //      the worker did not come up (timeout, exit, bad handshake)
  "WORKER_CRASHED", //           the worker died during a run; variables cleared
  "MEMORY_LIMIT", //             the worker exceeded --max-memory-mib; variables cleared
  "WORKER_FATAL", //             the cell left work that cannot be stopped; the worker exited
  "PYTHON_EXCEPTION", //         the cell or file raised (or exited with a nonzero status)
  "TIMEOUT", //                  the run's timeout expired
  "CANCELLED", //                the client or python_cancel stopped it
  // Kernel servers (--kernels)
  "KERNEL_SERVER_UNKNOWN", //    kernel_server names no entry of the kernel servers file
  "KERNEL_SERVER_FAILED", //     the Jupyter server is down, slow, refused the token or answered garbage
  "KERNEL_NOT_FOUND", //         no running kernel has that kernel_id (or the attached kernel is gone)
  "KERNEL_RESET_REFUSED", //     a reset would restart a kernel this server did not start (allowReset false)
  "KERNEL_CONNECTION_LOST", //   the kernel's connection dropped during a run; its outcome is unknown
  // Contained cells (--sandbox)
  "SANDBOX_UNAVAILABLE", //      this machine cannot contain cells as --sandbox asks (the message says why and what to do)
  "SANDBOX_DENIED", //           a path or host the sandbox policy does not allow (artifact tools of a contained session)
  // Broker (mcp.* inside cells)
  "BROKER_DISABLED", //          --mcp-scope none or REPL_MCP_NO_BRIDGE=1
  "CONFIG_INVALID", //           the registry cannot be loaded or is invalid
  "CREDENTIALS_MISSING", //      the peer needs credentials this server does not have
  "OAUTH_FAILED", //             an OAuth login or token request failed (the message says which step)
  "UNSUPPORTED", //              configured but not supported by this version
  "UNKNOWN_SERVER", //           not a configured, broker-allowed server
  "UNKNOWN_TOOL", //             the peer does not list that tool
  "TOOL_DENIED", //              allowedTools does not grant it
  "APPROVAL_REQUIRED", //        the registry's approve asks for the person, and nobody could be asked (or answered in time)
  "APPROVAL_DENIED", //          the person denied the call
  "INPUT_UNANSWERED", //         input() got no answer (nobody to ask, declined, expired); the cell sees EOFError
  "CONNECT_FAILED", //           the peer could not be reached (or failed recently)
  "CONNECT_TIMEOUT", //          connecting or initializing took too long
  "DEADLINE_EXCEEDED", //        the call's own timeout expired; the outcome may be unknown
  "MCP_PROTOCOL", //             the peer broke the protocol (bad catalogue, bad schema, transport error)
  "BRIDGE_INVALID", //           a malformed request from the worker's mcp helper
  // The durable journal (--journal)
  "JOURNAL_INVALID", //          the journal file exists but is not a journal this version reads
  "JOURNAL_PATH", //             --journal names something that cannot be the journal
  "JOURNAL_LOCK", //             its lock file cannot be created or opened
  "JOURNAL_OWNED", //            another repl-mcp holds the journal
  "JOURNAL_WRITE", //            a journal record could not be written
  "JOURNAL_FULL", //             every journal record is a call still in flight
  "TOOL_ERROR", //               artifact_forward: the downstream tool answered with isError
  // Artifacts
  "ARTIFACT_UNKNOWN", //         no artifact with that id in this session
  "ARTIFACT_TOO_LARGE", //       over the per-artifact or per-operation size limit
  "ARTIFACT_PATH", //            a path that must be absolute (or name a file) does not
  "ARTIFACT_OPEN", //            the source file cannot be opened
  "ARTIFACT_NOT_REGULAR", //     the source is not a regular file
  "ARTIFACT_EXISTS", //          the destination exists and overwrite is false
  "ARTIFACT_SAVE", //            the destination cannot be written
  "ARTIFACT_RANGE", //           offset/length outside the artifact
  "ARTIFACT_RANGE_UTF8", //      a text range that splits a UTF-8 character
  "ARTIFACT_NOT_UTF8", //        text or json content that is not UTF-8
  "ARTIFACT_BAD_JSON", //        json content that does not parse within bounds
  "ARTIFACT_CORRUPT", //         the stored bytes no longer match their SHA-256
  "ARTIFACT_BUSY", //            too many artifact file operations at once
  "ARTIFACT_IO", //              an upload failed while writing
  "ARTIFACT_UPLOADS", //         too many unfinished uploads
  "ARTIFACT_UPLOAD_UNKNOWN", //  no unfinished upload with that id
  "ARTIFACT_CHUNK", //           an upload chunk that is malformed or too big
  "ARTIFACT_OFFSET", //          an upload chunk at the wrong offset
  "ARTIFACT_HANDOVER", //        a file handed over for an upload is not acceptable or changed
  // Anything else is a bug of ours; it is logged with its stack.
  "INTERNAL",
] as const;

export const ErrorCodeName = v.picklist(ERROR_CODES);
export type ErrorCodeName = v.InferOutput<typeof ErrorCodeName>;

export class ReplError extends Error {
  constructor(
    readonly code: ErrorCodeName,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "ReplError";
  }
}

/** JSON-RPC 2.0's standard error codes (the protocol's, not the SDK's), for the errors we answer ourselves. */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
export const JSONRPC_METHOD_NOT_FOUND = -32601;
export const JSONRPC_INVALID_PARAMS = -32602;
export const JSONRPC_INTERNAL_ERROR = -32603;

/** A failure the client caused at the protocol level; answered as a JSON-RPC error, not a tool result. */
export class ProtocolError extends Error {
  // The SDK copies `code` and `message` of a thrown error into the JSON-RPC error object.
  readonly code = JSONRPC_INVALID_PARAMS;
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The stable code of any thrown value: its own for a ReplError, INTERNAL for everything else. */
export function codeOf(error: unknown): ErrorCodeName {
  return error instanceof ReplError ? error.code : "INTERNAL";
}
