// execute_python: one cell in a session's persistent worker, answered when it finishes.
import * as v from "valibot";
import {
  CODE_MAX_BYTES,
  TIMEOUT_DEFAULT_SECONDS,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
} from "../../limits.ts";
import { ExecutionResult } from "../../worker/result.ts";
import { jsonSchemaOf } from "../schema.ts";
import { defineTool } from "./tool.ts";

const SessionId = v.pipe(
  v.string(),
  v.description(
    "Get from python_health.server.session_id (or python_session_open); omit to use the default session",
  ),
);

export const executePython = defineTool({
  name: "execute_python",
  description:
    "Run Python in a persistent, trusted local worker with full host access (not a sandbox). Variables, " +
    "imports and the asyncio loop survive between calls; top-level await works; the trailing expression's " +
    "value is returned as a safe preview that never calls your __repr__. timeout is 0.01..3600 s (default 120); code is at most " +
    "256 KiB. reset=true restarts the worker, clearing variables, cwd and environment changes. A timeout or " +
    "cancellation stops the cell, but external effects it already caused may have happened.",
  input: v.strictObject({
    code: v.pipe(v.string(), v.maxLength(CODE_MAX_BYTES), v.description("Python source of the cell")),
    session_id: v.optional(SessionId),
    expected_generation: v.optional(
      v.pipe(
        v.number(),
        v.integer(),
        v.minValue(0),
        v.description(
          "Refuse to run (STATE_CHANGED) unless the session's worker generation still equals this",
        ),
      ),
    ),
    reset: v.optional(v.pipe(v.boolean(), v.description("Restart the worker before running")), false),
    timeout: v.optional(
      v.pipe(
        v.number(),
        v.minValue(TIMEOUT_MIN_SECONDS),
        v.maxValue(TIMEOUT_MAX_SECONDS),
        v.description("Seconds before the cell is interrupted"),
      ),
      TIMEOUT_DEFAULT_SECONDS,
    ),
  }),
  output: jsonSchemaOf(ExecutionResult),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async handle(args, ctx, call) {
    const session = ctx.sessions.route(args.session_id);
    return session.supervisor.execute({
      code: args.code,
      timeoutSeconds: args.timeout,
      reset: args.reset,
      expectedGeneration: args.expected_generation,
      signal: call.signal,
    });
  },
});
