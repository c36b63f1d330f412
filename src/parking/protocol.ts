// The lines a keeping guardian and a server exchange over the guardian's socket (docs/architecture.md,
// "Parking"). Worker frames pass through unchanged in both directions; the guardian's own lines and the
// server's requests to it are JSON objects whose first key is "guardian", told apart from frames (whose
// first key is always "type") by their first bytes alone, so relaying a frame never costs a parse.
import * as v from "valibot";

export const KEEPER_PROTOCOL_VERSION = 1;

/** Every guardian line starts with these bytes (JSON.stringify puts the first key first). */
export const GUARDIAN_LINE_PREFIX = '{"guardian":"';

const Pid = v.pipe(v.number(), v.integer(), v.minValue(1));
const Grace = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(60_000));

/** From a server (or `repl-mcp sessions stop`) to the guardian. */
export const KeeperRequest = v.variant("guardian", [
  /** Take the worker over: from here on this connection is its server. */
  v.strictObject({ guardian: v.literal("adopt"), proof: v.string(), holder: Pid }),
  /** End the worker for good; `proof` is needed unless this connection holds it already. */
  v.strictObject({ guardian: v.literal("end"), proof: v.optional(v.string()), grace_ms: Grace }),
]);
export type KeeperRequest = v.InferOutput<typeof KeeperRequest>;

/** The run a worker was busy with when it was adopted (its result may be among the kept frames). */
export const RunningCell = v.object({
  id: v.string(),
  /** Milliseconds since the epoch, when its execute frame went through. */
  started_at: v.number(),
  timeout_seconds: v.number(),
  /** Set when it ended while parked (its result is among the kept frames). */
  ended_at: v.optional(v.number()),
});
export type RunningCell = v.InferOutput<typeof RunningCell>;

/** From the guardian. */
export const KeeperMessage = v.variant("guardian", [
  v.object({ guardian: v.literal("hello"), nonce: v.string(), version: v.number() }),
  v.object({
    guardian: v.literal("refused"),
    code: v.picklist(["SESSION_HELD", "WRONG_SECRET", "ENDING", "BAD_REQUEST"]),
    message: v.string(),
    holder: v.optional(v.nullable(v.number())),
  }),
  v.object({
    guardian: v.literal("adopted"),
    /** The worker's ready frame, as it sent it. */
    ready: v.record(v.string(), v.unknown()),
    generation: v.number(),
    /** The guardian's pid: the process group of the guardian and the worker. */
    pgid: Pid,
    /** When the previous server let go (ms since the epoch); null for the server that started it. */
    parked_since: v.nullable(v.number()),
    /** Frames that were kept while parked and had to be dropped past the bound. */
    dropped_frames: v.number(),
    running: v.nullable(RunningCell),
    containment: v.optional(v.unknown()),
  }),
  v.object({ guardian: v.literal("ending") }),
  /** The worker's native stderr (fd 2), base64, in order with its frames. */
  v.object({ guardian: v.literal("stderr"), data: v.string() }),
]);
export type KeeperMessage = v.InferOutput<typeof KeeperMessage>;

/** What an answered-while-parked bridge request says to the cell. */
export const PARKED_RPC_ERROR =
  "The repl-mcp server that brokered this session's MCP calls and questions is gone (the session is " +
  "parked until a server adopts it); the request was not made";
