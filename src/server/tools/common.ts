// Pieces several tools share: the session_id argument, the cell input, identity stamping, and the
// failure shapes every isError result has.
import * as v from "valibot";
import { ErrorCodeName, type ReplError } from "../../errors.ts";
import {
  CODE_MAX_BYTES,
  TIMEOUT_DEFAULT_SECONDS,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
} from "../../limits.ts";
import type { Session } from "../../sessions/session.ts";
import type { ExecutionResult } from "../../worker/result.ts";
import { isU64 } from "../schema.ts";

export const SessionId = v.pipe(
  v.string(),
  v.description(
    "From python_health.server.session_id or python_session_open. Omitted: the default session, except " +
      "that execute_python and python_start under the stateless MCP 2026-07-28 revision require it",
  ),
);

export const Timeout = v.optional(
  v.pipe(
    v.number(),
    v.minValue(TIMEOUT_MIN_SECONDS),
    v.maxValue(TIMEOUT_MAX_SECONDS),
    v.description(`Seconds before the run is interrupted (${TIMEOUT_MIN_SECONDS}..${TIMEOUT_MAX_SECONDS})`),
  ),
  TIMEOUT_DEFAULT_SECONDS,
);

/** A whole number a u64 holds; any other number is refused with its own message (server/schema.ts). */
export const U64 = v.pipe(v.number(), v.integer(), v.minValue(0), v.check(isU64));

export const ExpectedGeneration = v.optional(
  v.pipe(
    U64,
    v.description("Refuse to run (STATE_CHANGED) unless the session's worker generation still equals this"),
  ),
);

/** The input of execute_python and python_start: one cell and how to run it. */
export const CellInput = v.strictObject({
  code: v.pipe(v.string(), v.maxLength(CODE_MAX_BYTES), v.description("Python source of the cell")),
  session_id: v.optional(SessionId),
  expected_generation: ExpectedGeneration,
  reset: v.optional(v.pipe(v.boolean(), v.description("Restart the worker before running")), false),
  timeout: Timeout,
});

/** The identity routed results carry (stamped unless the value already has its own). */
export const Identity = {
  server_id: v.string(),
  session_id: v.string(),
  generation: v.pipe(v.number(), v.integer(), v.minValue(0)),
};

/** What every failed tool result carries: the message, and the stable code to branch on. */
export const Failed = { error: v.string(), error_code: ErrorCodeName };

/** A tool-level failure (docs/tools.md "Errors"): `{error, error_code}`, plus identity for routed tools. */
export const ToolFailure = v.object({ ...Failed });
export const RoutedFailure = v.object({ ...Failed, ...Identity });

export function failureOf(error: ReplError): v.InferOutput<typeof ToolFailure> {
  return { error: error.message, error_code: error.code };
}

/** A refused execution's message and code, for tools that answer in their own shape. */
export function failureFrom(result: ExecutionResult): v.InferOutput<typeof ToolFailure> {
  return { error: result.error ?? "Execution failed", error_code: result.error_code ?? "INTERNAL" };
}

/** Routed results carry the identity of the session that answered, unless they already have one. */
export function stamp<T extends object>(
  session: Session,
  value: T,
): T & { server_id: string; session_id: string; generation: number } {
  return {
    server_id: session.serverId,
    session_id: session.id,
    generation: session.supervisor.generation,
    ...value,
  };
}
