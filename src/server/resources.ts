// Artifacts as MCP resources: every artifact is listed with its owner session in the URI, can be read
// whole when it fits one MCP message, and clients hear when the list changes. Reads go through the same
// store lookup as the tools, so an id under the wrong session is simply unknown.
import type { Server } from "@modelcontextprotocol/server";
import { decodeUtf8 } from "../artifacts/content.ts";
import { ArtifactMessages, type ArtifactReference, MIME_TYPES } from "../artifacts/reference.ts";
import type { ArtifactStore } from "../artifacts/store.ts";
import { artifactUri, parseArtifactUri } from "../artifacts/uri.ts";
import { codeOf, describe, JSONRPC_INVALID_PARAMS, ReplError } from "../errors.ts";
import { ARTIFACT_RESOURCE_MAX_BYTES, MCP_MESSAGE_MAX_BYTES } from "../limits.ts";
import { utf8Bytes } from "../text/utf8.ts";

/**
 * JSON-RPC codes the MCP specification gives resource reads. 2026-07-28 answers an unknown resource with
 * -32602; earlier revisions used -32002, which the SDK now maps to -32602 for every era.
 */
const RESOURCE_NOT_FOUND = -32002;
const INVALID_PARAMS = JSONRPC_INVALID_PARAMS;

/** Room for a text resource's escaped content in one MCP message, leaving the envelope its share. */
const RESOURCE_TEXT_MAX_BYTES = MCP_MESSAGE_MAX_BYTES - 64 * 1024;

const TOO_LARGE =
  "Artifact is larger than 512 KiB, too large for one MCP message; read it in ranges with artifact_read " +
  "(offset, length <= 65536) or write it to a file with artifact_save";

/** An error the SDK sends as a JSON-RPC error with exactly this code, message and data. */
function rpcError(code: number, message: string, data?: unknown): Error {
  return Object.assign(new Error(message), { code, ...(data === undefined ? {} : { data }) });
}

/** The resource description of one artifact; the resource_link block of a result uses it too. */
export function artifactResource(sessionId: string, reference: ArtifactReference) {
  return {
    uri: artifactUri(sessionId, reference.id),
    name: reference.id,
    title: `${reference.format} artifact, ${reference.size} bytes`,
    description:
      `A ${reference.format} artifact of session ${sessionId} (sha256 ${reference.sha256}). ` +
      "Read ranges with artifact_read; save it with artifact_save.",
    mimeType: MIME_TYPES[reference.format],
    size: reference.size,
  };
}

/**
 * Serves the artifacts of the sessions `owns` accepts (one client's); another client's are unknown.
 * With `announce`, the client hears when the list changes; the returned function stops that, for when
 * the client goes.
 */
export function serveResources(
  server: Server,
  store: ArtifactStore,
  owns: (sessionId: string) => boolean,
  { announce }: { announce: boolean },
): () => void {
  server.setRequestHandler("resources/list", async () => ({
    resources: store
      .list()
      .filter(({ owner }) => owns(owner))
      .map(({ owner, reference }) => artifactResource(owner, reference)),
  }));

  server.setRequestHandler("resources/templates/list", async () => ({
    resourceTemplates: [
      {
        uriTemplate: "repl-mcp://artifacts/{session_id}/{id}",
        name: "artifact",
        title: "An artifact of a session",
        description: "Whole values kept by repl-mcp (large trailing values, artifact() and artifact_create).",
      },
    ],
  }));

  server.setRequestHandler("resources/read", async (request) => {
    const { uri } = request.params;
    const address = parseArtifactUri(uri);
    if (!address) {
      throw rpcError(
        INVALID_PARAMS,
        "Unknown resource URI; artifact URIs look like repl-mcp://artifacts/<session_id>/<artifact id>",
        { uri },
      );
    }
    let whole: Awaited<ReturnType<ArtifactStore["readWhole"]>>;
    try {
      if (!owns(address.sessionId)) throw new ReplError("ARTIFACT_UNKNOWN", ArtifactMessages.unknown);
      whole = await store.readWhole(address.sessionId, address.id, ARTIFACT_RESOURCE_MAX_BYTES, TOO_LARGE);
    } catch (error) {
      const message = describe(error);
      const code = codeOf(error) === "ARTIFACT_UNKNOWN" ? RESOURCE_NOT_FOUND : INVALID_PARAMS;
      throw rpcError(code, error instanceof ReplError ? message : "Artifact could not be read", { uri });
    }
    const { reference, bytes } = whole;
    const mimeType = MIME_TYPES[reference.format];
    const text = reference.format === "binary" ? undefined : decodeUtf8(bytes);
    // JSON escaping can grow text sixfold (control characters); base64 never grows it past 4/3, so text
    // that would not fit one message is sent as a blob instead of being dropped by the transport.
    if (text !== undefined && utf8Bytes(JSON.stringify(text)) <= RESOURCE_TEXT_MAX_BYTES) {
      return { contents: [{ uri, mimeType, text }] };
    }
    const blob = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
    return { contents: [{ uri, mimeType, blob }] };
  });

  if (!announce) return () => {};
  // A burst of changes (a commit that evicts several) becomes one notification.
  let pending = false;
  return store.onChange(() => {
    if (pending) return;
    pending = true;
    setTimeout(() => {
      pending = false;
      server.sendResourceListChanged().catch(() => {
        // Not connected yet, or the client is gone: nobody to tell.
      });
    }, 0);
  });
}
