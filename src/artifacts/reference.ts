// What an agent or a cell holds in place of a large value: the artifact reference (docs/artifacts.md), and
// the messages every artifact operation shares. The valibot schemas are the single source of the types
// and of the published output schemas.
import * as v from "valibot";

export const ArtifactFormat = v.picklist(["json", "text", "binary"]);
export type ArtifactFormat = v.InferOutput<typeof ArtifactFormat>;

export const ArtifactReference = v.object({
  id: v.pipe(v.string(), v.uuid()),
  size: v.pipe(v.number(), v.integer(), v.minValue(0)),
  format: ArtifactFormat,
  sha256: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/)),
  lifetime: v.literal("server"),
  eviction: v.literal("oldest-first"),
});
export type ArtifactReference = v.InferOutput<typeof ArtifactReference>;

export const MIME_TYPES: Record<ArtifactFormat, string> = {
  json: "application/json",
  text: "text/plain",
  binary: "application/octet-stream",
};

export const ArtifactMessages = {
  unknown: "Artifact unknown, expired, evicted or belongs to another session",
  needsPath: "Artifact needs absolute path and format json/text/binary",
  cannotOpen: "Artifact input cannot be opened",
  notRegular: "Artifact input must be a regular file",
  tooLarge: "Artifact exceeds 16 MiB",
  notUtf8: "Text/JSON artifact must be UTF-8",
  badJson: "Artifact JSON invalid or exceeds parser nesting limit",
  ioCapacity: "Artifact I/O capacity exhausted; retry after active jobs complete",
  range: "Artifact range must fit file and length must be <= 65536 bytes",
  rangeNotUtf8: "Range is not complete UTF-8; adjust boundaries or request hex/base64",
  destinationRelative: "Artifact destination must be absolute",
  destinationExists: "Artifact destination exists or cannot be linked; overwrite requires explicit true",
  hashMismatch: "Artifact content failed SHA256 verification",
  forwardTooLarge:
    "Artifact forwarding limit is 512 KiB; save the file or explicitly create a smaller artifact",
  forwardNotJson: "Artifact is not valid bounded JSON",
  forwardNotText: "Artifact is not UTF-8 text",
  uploadCapacity: "Artifact upload capacity exhausted (4 unfinished uploads); commit or abort one first",
  uploadUnknown: "Artifact upload unknown, finished, or begun by another cell",
  uploadOffset: "Artifact upload offset mismatch; do not replay an append",
  uploadChunk: "Artifact upload chunk must be base64 of at most 32768 bytes",
  uploadPiece:
    "Artifact upload piece must be 1..1048576 bytes already written to the handed-over file, and only an upload begun with a file takes pieces",
  handoverUnavailable: "Artifact file handover needs Linux /proc; send the bytes as chunks",
  handoverRefused:
    "Artifact file handover refused: the descriptor must be an empty, unnamed (O_TMPFILE) regular file of this user, private to it; send the bytes as chunks",
  handoverChanged: "Artifact handover file does not hold exactly the bytes appended; upload it again",
} as const;
