// One session's view of the artifact store: what its tools and its cells' `artifact.*` requests may do.
// Paths from tools resolve against the project; paths from cells must already be absolute (the Python
// helpers expand them in the worker's cwd). Forwarding is one broker call like any mcp.call.
import { resolve } from "node:path";
import * as v from "valibot";
import { decodeUtf8, encodeRange, fail, parseBoundedJson } from "../artifacts/content.ts";
import { ArtifactFormat, type ArtifactReference, ArtifactMessages as M } from "../artifacts/reference.ts";
import type { ArtifactStore } from "../artifacts/store.ts";
import type { Broker, CallContext } from "../broker/broker.ts";
import { ReplError } from "../errors.ts";
import {
  ARTIFACT_FORWARD_MAX_BYTES,
  ARTIFACT_READ_MAX_BYTES,
  BROKER_CALL_TIMEOUT_DEFAULT_SECONDS,
} from "../limits.ts";
import type { PathRules } from "../sandbox/paths.ts";
import type { SandboxDenial } from "../worker/frames.ts";

export const RangeEncoding = v.picklist(["text", "base64", "hex"]);
export const ForwardFormat = v.picklist(["json", "text", "base64"]);
const Id = v.pipe(v.string(), v.minLength(1));
const Offset = v.pipe(v.number(), v.integer(), v.minValue(0));

export const ReadParams = v.object({
  id: Id,
  offset: v.optional(Offset, 0),
  length: v.optional(
    v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(ARTIFACT_READ_MAX_BYTES)),
    ARTIFACT_READ_MAX_BYTES,
  ),
  encoding: v.optional(RangeEncoding, "text"),
});
export const ForwardParams = v.object({
  id: Id,
  server: v.pipe(v.string(), v.minLength(1)),
  tool: v.pipe(v.string(), v.minLength(1)),
  argument: v.pipe(v.string(), v.minLength(1)),
  format: v.optional(ForwardFormat, "json"),
  arguments: v.optional(v.record(v.string(), v.unknown())),
});

const RpcParams = {
  "artifact.create": v.object({ path: v.string(), format: ArtifactFormat }),
  "artifact.read": ReadParams,
  "artifact.save": v.object({ id: Id, path: v.string(), overwrite: v.optional(v.boolean(), false) }),
  "artifact.drop": v.object({ id: Id }),
  "artifact.forward": ForwardParams,
  "artifact.begin": v.object({ format: ArtifactFormat, fd: v.optional(Offset) }),
  "artifact.append": v.union([
    v.object({ upload_id: Id, offset: Offset, data: v.string() }),
    v.object({ upload_id: Id, offset: Offset, size: Offset }),
  ]),
  "artifact.commit": v.object({ upload_id: Id }),
  "artifact.abort": v.object({ upload_id: Id }),
};

export const FORWARD_CANCELLED_BEFORE = "Forwarding cancelled before dispatch";
export const FORWARD_CANCELLED_AFTER =
  "Forwarding cancelled; external effects may already have occurred; inspect the broker journal";
export const FORWARD_SESSION_CLOSED =
  "Session closed; forwarding cancelled; external effects may already have occurred";

export interface OpContext {
  runId: string | null;
  signal: AbortSignal;
  /** The worker that asked: a file it hands over for an upload is opened through its /proc entry. */
  workerPid?: number;
  /** Asks the person about a forward the registry's `approve` names (see Broker.call). */
  approve?: CallContext["approve"];
}

export class SessionArtifacts {
  constructor(
    private readonly store: ArtifactStore,
    private readonly broker: Broker,
    private readonly sessionId: string,
    private readonly project: string,
    /** Aborted when the session closes. */
    private readonly closing: AbortSignal,
    /** A contained session's rules for the paths the server opens for it (docs/sandbox.md). */
    private readonly sandbox?: { rules: () => PathRules; refused: (denial: SandboxDenial) => void },
  ) {}

  /** The same check on the file actually opened, for a contained session. */
  private recheck(access: "read" | "write"): ((path: string) => void) | undefined {
    return this.sandbox ? (path) => void this.guard(path, access) : undefined;
  }

  /** A path the sandbox would not let the session read (or write) is refused here too. */
  private guard(path: string, access: "read" | "write"): string {
    if (!this.sandbox) return path;
    const rules = this.sandbox.rules();
    const refusal = access === "read" ? rules.refusesRead(path) : rules.refusesWrite(path);
    if (!refusal) return path;
    this.sandbox.refused({ kind: access, target: refusal.path, reason: refusal.reason });
    throw new ReplError("SANDBOX_DENIED", `The sandbox refuses this: ${refusal.path} ${refusal.reason}`);
  }

  isRpc(op: string): op is keyof typeof RpcParams {
    return Object.hasOwn(RpcParams, op);
  }

  /** A cell's `artifact.*` request; paths must be absolute. */
  async rpc(op: keyof typeof RpcParams, params: unknown, context: OpContext): Promise<unknown> {
    const take = <K extends keyof typeof RpcParams>(name: K): v.InferOutput<(typeof RpcParams)[K]> => {
      const parsed = v.safeParse(RpcParams[name], params);
      if (!parsed.success) {
        throw new ReplError("BRIDGE_INVALID", `Invalid parameters for ${name}; see help(artifact) in a cell`);
      }
      return parsed.output as v.InferOutput<(typeof RpcParams)[K]>;
    };
    const { runId } = context;
    const { uploads } = this.store;
    const owner = this.sessionId;
    switch (op) {
      case "artifact.create": {
        const p = take(op);
        return this.store.importFile(owner, this.guard(p.path, "read"), p.format, this.recheck("read"));
      }
      case "artifact.read":
        return this.read(take(op));
      case "artifact.save": {
        const p = take(op);
        return this.save(p.id, p.path, p.overwrite);
      }
      case "artifact.drop":
        return this.delete(take(op).id);
      case "artifact.forward":
        return this.forward(take(op), context);
      case "artifact.begin": {
        const p = take(op);
        const { workerPid } = context;
        if (p.fd !== undefined && workerPid === undefined)
          throw fail(M.handoverUnavailable, "ARTIFACT_HANDOVER");
        const handover = p.fd === undefined ? undefined : { pid: workerPid as number, fd: p.fd };
        return uploads.begin(owner, runId, p.format, handover);
      }
      case "artifact.append": {
        const p = take(op);
        const next = "data" in p ? { data: p.data } : { size: p.size };
        return uploads.append(owner, runId, p.upload_id, p.offset, next);
      }
      case "artifact.commit":
        return uploads.commit(owner, runId, take(op).upload_id);
      case "artifact.abort":
        return uploads.abort(owner, runId, take(op).upload_id);
    }
  }

  /** A tool's import: a relative path is the project's. */
  create(path: string, format: ArtifactFormat): Promise<ArtifactReference> {
    const checked = this.guard(resolve(this.project, path), "read");
    return this.store.importFile(this.sessionId, checked, format, this.recheck("read"));
  }

  async read(params: v.InferOutput<typeof ReadParams>) {
    const { reference, bytes, hasMore } = await this.store.read(
      this.sessionId,
      params.id,
      params.offset,
      params.length,
    );
    const content = encodeRange(bytes, params.encoding);
    if (content === undefined) throw fail(M.rangeNotUtf8, "ARTIFACT_RANGE_UTF8");
    return {
      artifact: reference,
      offset: params.offset,
      length: bytes.length,
      encoding: params.encoding,
      content,
      has_more: hasMore,
    };
  }

  async save(id: string, path: string, overwrite: boolean) {
    const checked = this.guard(path, "write");
    const artifact = await this.store.save(this.sessionId, id, checked, overwrite, this.recheck("write"));
    return { artifact, saved: true as const, path };
  }

  /** A tool's save: a relative destination is the project's. */
  saveFromTool(id: string, path: string, overwrite: boolean) {
    return this.save(id, resolve(this.project, path), overwrite);
  }

  delete(id: string) {
    const reference = this.store.delete(this.sessionId, id);
    return { id: reference.id, deleted: true as const };
  }

  /** Reads, converts and sends the artifact as one argument of one downstream call. Never retried. */
  async forward(params: v.InferOutput<typeof ForwardParams>, context: OpContext) {
    const signal = AbortSignal.any([context.signal, this.closing]);
    let dispatched = false;
    try {
      const { bytes } = await this.store.readWhole(
        this.sessionId,
        params.id,
        ARTIFACT_FORWARD_MAX_BYTES,
        M.forwardTooLarge,
      );
      const payload = convert(bytes, params.format);
      if (signal.aborted) throw new ReplError("CANCELLED", FORWARD_CANCELLED_BEFORE);
      const args = { ...(params.arguments ?? {}), [params.argument]: payload };
      return await this.broker.call(params.server, params.tool, args, BROKER_CALL_TIMEOUT_DEFAULT_SECONDS, {
        sessionId: this.sessionId,
        runId: context.runId,
        signal,
        approve: context.approve,
        onDispatch: () => {
          dispatched = true;
        },
      });
    } catch (error) {
      if (!signal.aborted) throw error;
      if (!dispatched) throw new ReplError("CANCELLED", FORWARD_CANCELLED_BEFORE);
      if (this.closing.aborted) throw new ReplError("CANCELLED", FORWARD_SESSION_CLOSED);
      throw new ReplError("CANCELLED", FORWARD_CANCELLED_AFTER);
    }
  }
}

function convert(bytes: Uint8Array, format: v.InferOutput<typeof ForwardFormat>): unknown {
  if (format === "base64")
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
  const text = decodeUtf8(bytes);
  if (format === "text") {
    if (text === undefined) throw fail(M.forwardNotText, "ARTIFACT_NOT_UTF8");
    return text;
  }
  const parsed = text === undefined ? undefined : parseBoundedJson(text);
  if (!parsed) throw fail(M.forwardNotJson, "ARTIFACT_BAD_JSON");
  return parsed.value;
}
