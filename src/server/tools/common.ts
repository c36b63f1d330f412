// Pieces several tools share: the session_id argument, identity stamping and the timeout argument.
import * as v from "valibot";
import { TIMEOUT_DEFAULT_SECONDS, TIMEOUT_MAX_SECONDS, TIMEOUT_MIN_SECONDS } from "../../limits.ts";
import type { Session } from "../../sessions/session.ts";

export const SessionId = v.pipe(
  v.string(),
  v.description("From python_health.server.session_id or python_session_open; omitted → the default session"),
);

export const Timeout = v.optional(
  v.pipe(
    v.number(),
    v.minValue(TIMEOUT_MIN_SECONDS),
    v.maxValue(TIMEOUT_MAX_SECONDS),
    v.description("Seconds before the run is interrupted (0.01..3600)"),
  ),
  TIMEOUT_DEFAULT_SECONDS,
);

export const ExpectedGeneration = v.optional(
  v.pipe(
    v.number(),
    v.integer(),
    v.minValue(0),
    v.description("Refuse to run (STATE_CHANGED) unless the session's worker generation still equals this"),
  ),
);

/** Routed results carry the identity of the session that answered, unless they already have one. */
export function stamp(session: Session, value: Record<string, unknown>): Record<string, unknown> {
  return {
    server_id: session.serverId,
    session_id: session.id,
    generation: session.supervisor.generation,
    ...value,
  };
}

/** `{"type":"object","oneOf":[success, {"required":["error"]}]}` as the contract publishes it. */
export function successOrError(success: Record<string, unknown>) {
  return { type: "object" as const, oneOf: [success, { required: ["error"] }] };
}
