// The artifact tools: whole values kept by the server, read in ranges, saved byte-exact to disk, or
// forwarded to another MCP server, so that large content never has to pass through the agent's context.
import * as v from "valibot";
import { ArtifactFormat, ArtifactReference } from "../../artifacts/reference.ts";
import { ReplError } from "../../errors.ts";
import { ARTIFACT_READ_MAX_BYTES } from "../../limits.ts";
import { Questions } from "../../person/questions.ts";
import { ForwardFormat, RangeEncoding } from "../../sessions/artifacts.ts";
import type { Session } from "../../sessions/session.ts";
import { failureOf, RoutedFailure, SessionId, stamp, U64 } from "./common.ts";
import { defineTool } from "./tool.ts";

const WRITES = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };
const Id = v.pipe(v.string(), v.minLength(1), v.description("The artifact's id (from its reference)"));
const Path = (what: string) =>
  v.pipe(v.string(), v.minLength(1), v.description(`${what} (relative: to the session's project)`));

/** Success shapes; identity fields are stamped on top, so the objects stay open. */
export const ArtifactOutputs = {
  create: v.looseObject(ArtifactReference.entries),
  read: v.looseObject({
    artifact: ArtifactReference,
    offset: v.number(),
    length: v.number(),
    encoding: RangeEncoding,
    content: v.string(),
    has_more: v.boolean(),
  }),
  save: v.looseObject({ artifact: ArtifactReference, saved: v.literal(true), path: v.string() }),
  delete: v.looseObject({ id: v.string(), deleted: v.literal(true) }),
  forward: v.looseObject({
    content: v.array(v.unknown()),
    structuredContent: v.optional(v.unknown()),
    isError: v.optional(v.boolean()),
    _meta: v.optional(v.unknown()),
  }),
};

/** Success or a routed failure: {error, error_code} with the session's identity (docs/tools.md "Errors"). */
const output = <S extends v.GenericSchema<unknown, Record<string, unknown>>>(schema: S) =>
  v.union([schema, RoutedFailure]);

/** Runs one artifact operation of a session; its answer and its failures both carry the identity. */
async function routed<T extends object>(session: Session, work: () => Promise<T> | T) {
  try {
    return stamp(session, await work());
  } catch (error) {
    // Anything but our own errors is a bug: the server logs it with its stack.
    if (!(error instanceof ReplError)) throw error;
    return stamp(session, failureOf(error));
  }
}

export const artifactCreate = defineTool({
  name: "artifact_create",
  description:
    "Copy a regular file into the server's artifact store and get a reference {id, size, format, sha256}. " +
    "format text or json checks UTF-8 (and JSON syntax); binary takes any bytes. At most 16 MiB per " +
    "artifact; the store keeps 64 artifacts / 64 MiB and evicts the oldest when a new one arrives. " +
    "Artifacts belong to the session and survive worker resets; they go when the session closes.",
  input: v.strictObject({
    session_id: SessionId,
    path: Path("The file to copy"),
    format: ArtifactFormat,
  }),
  output: output(ArtifactOutputs.create),
  annotations: WRITES,
  async handle(args, ctx) {
    const session = ctx.sessions.route(args.session_id);
    return routed(session, () => session.artifacts.create(args.path, args.format));
  },
});

export const artifactRead = defineTool({
  name: "artifact_read",
  description:
    "Read a byte range of an artifact (at most 65536 bytes) as text, base64 or hex; has_more says whether " +
    "bytes follow. A text range must hold complete UTF-8 characters: move the bounds or ask for hex/base64.",
  input: v.strictObject({
    session_id: SessionId,
    id: Id,
    offset: v.optional(v.pipe(U64, v.description("First byte")), 0),
    length: v.optional(
      v.pipe(U64, v.maxValue(ARTIFACT_READ_MAX_BYTES), v.description("Bytes to read (0..65536)")),
      ARTIFACT_READ_MAX_BYTES,
    ),
    encoding: v.optional(RangeEncoding, "text"),
  }),
  output: output(ArtifactOutputs.read),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  async handle(args, ctx) {
    const session = ctx.sessions.route(args.session_id);
    return routed(session, () => session.artifacts.read(args));
  },
});

export const artifactSave = defineTool({
  name: "artifact_save",
  description:
    "Write an artifact's exact bytes to a file, after checking its SHA-256. The file is written privately " +
    "(mode 0600) beside the destination and flushed before it appears under its name; an existing file is " +
    "replaced only with overwrite=true.",
  input: v.strictObject({
    session_id: SessionId,
    id: Id,
    path: Path("Destination file"),
    overwrite: v.optional(v.boolean(), false),
  }),
  output: output(ArtifactOutputs.save),
  annotations: WRITES,
  async handle(args, ctx) {
    const session = ctx.sessions.route(args.session_id);
    return routed(session, () => session.artifacts.saveFromTool(args.id, args.path, args.overwrite));
  },
});

export const artifactDelete = defineTool({
  name: "artifact_delete",
  description: "Delete an artifact now instead of waiting for its session to close or for eviction.",
  input: v.strictObject({ session_id: SessionId, id: Id }),
  output: output(ArtifactOutputs.delete),
  annotations: WRITES,
  async handle(args, ctx) {
    const session = ctx.sessions.route(args.session_id);
    return routed(session, () => session.artifacts.delete(args.id));
  },
});

export const artifactForward = defineTool({
  name: "artifact_forward",
  description:
    "Send an artifact (at most 512 KiB) as one argument of a tool of an MCP server configured for this " +
    "session's broker, without the content passing through your context. format json parses it, text " +
    "sends it as a string, base64 encodes its bytes; it goes under the key named by `argument`, on top of " +
    "`arguments`. Broker rules apply (allowedTools, the tool's schema, the 256 KiB argument budget, the " +
    "journal); the call is never retried. Returns the tool's complete result.",
  input: v.strictObject({
    session_id: SessionId,
    id: Id,
    server: v.pipe(v.string(), v.minLength(1), v.description("A server of the broker's registry")),
    tool: v.pipe(v.string(), v.minLength(1)),
    argument: v.pipe(v.string(), v.minLength(1), v.description("The argument that receives the content")),
    format: v.optional(ForwardFormat, "json"),
    arguments: v.optional(v.record(v.string(), v.unknown()), {}),
  }),
  output: output(ArtifactOutputs.forward),
  annotations: WRITES,
  async handle(args, ctx, call) {
    const session = ctx.sessions.route(args.session_id);
    return routed(session, async () => {
      // The person is asked (if the registry says so) through this call's client and the viewer.
      const questions = new Questions();
      if (call.elicitation) questions.attach(call.elicitation);
      const approve = session.asking.approver(questions, null);
      const answer = await session.artifacts.forward(args, { runId: null, signal: call.signal, approve });
      // The SDK already checked it is a CallToolResult; this gives it the published type.
      const envelope = v.parse(ArtifactOutputs.forward, answer);
      // A downstream isError becomes ours, and every isError result carries a code.
      return envelope.isError === true ? { ...envelope, error_code: "TOOL_ERROR" as const } : envelope;
    });
  },
});
