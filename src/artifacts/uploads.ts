// Uploads of values from cells: begin, appends at the current size, then commit (or abort). An append
// carries a chunk of ≤ 32 KiB in base64, or — when the upload began with a file the worker handed over
// (file.ts, adopt) — only the size of the next piece the worker wrote into that file itself. Each upload
// belongs to the session and the run that began it, lands in a private file and is hashed as it goes,
// so committing a 16 MiB value costs no second pass over binary content. Appends are handled in the
// order they arrive, so a worker may keep several in flight.
import {
  ARTIFACT_CHUNK_BASE64_CHARS,
  ARTIFACT_CHUNK_BYTES,
  ARTIFACT_MAX_BYTES,
  ARTIFACT_PIECE_MAX_BYTES,
  ARTIFACT_UPLOADS_MAX,
} from "../limits.ts";
import { checkContent, fail } from "./content.ts";
import { PrivateFile } from "./file.ts";
import { type ArtifactFormat, type ArtifactReference, ArtifactMessages as M } from "./reference.ts";

interface Upload {
  id: string;
  owner: string;
  runId: string | null;
  format: ArtifactFormat;
  file: PrivateFile;
  /** The worker writes the bytes into `file` itself; appends only say how far. */
  handedOver: boolean;
  size: number;
  hash: Bun.CryptoHasher;
  /** Appends are written in order; commit waits for the last one. */
  writing: Promise<void>;
  failed: boolean;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Publishes a finished upload's file as an artifact: the store's adopt(), handed down to us. */
export type Publish = (
  owner: string,
  file: PrivateFile,
  size: number,
  sha256: string,
  format: ArtifactFormat,
) => ArtifactReference;

export class Uploads {
  private readonly open = new Map<string, Upload>();
  /** Slots taken by begins still creating their file. */
  private starting = 0;
  /** Where the pieces of handed-over uploads are read to be hashed. */
  private scratch: Buffer | undefined;

  constructor(private readonly publish: Publish) {}

  get unfinished(): number {
    return this.open.size + this.starting;
  }

  /** `handover`: the worker's descriptor of an unnamed file it will write the bytes into. */
  async begin(
    owner: string,
    runId: string | null,
    format: ArtifactFormat,
    handover?: { pid: number; fd: number },
  ) {
    if (this.unfinished >= ARTIFACT_UPLOADS_MAX) throw fail(M.uploadCapacity, "ARTIFACT_UPLOADS");
    this.starting++;
    let file: PrivateFile;
    try {
      file = handover ? await PrivateFile.adopt(handover.pid, handover.fd) : await PrivateFile.create();
    } finally {
      this.starting--;
    }
    const upload: Upload = {
      id: crypto.randomUUID(),
      owner,
      runId,
      format,
      file,
      handedOver: handover !== undefined,
      size: 0,
      hash: new Bun.CryptoHasher("sha256"),
      writing: Promise.resolve(),
      failed: false,
    };
    this.open.set(upload.id, upload);
    const sizes = { chunk_bytes: ARTIFACT_CHUNK_BYTES, max_bytes: ARTIFACT_MAX_BYTES };
    return handover
      ? { upload_id: upload.id, ...sizes, piece_bytes: ARTIFACT_PIECE_MAX_BYTES }
      : { upload_id: upload.id, ...sizes };
  }

  /** The next bytes: a base64 chunk (`data`), or the length of a piece written to a handed-over file. */
  async append(
    owner: string,
    runId: string | null,
    uploadId: string,
    offset: number,
    next: { data: string } | { size: number },
  ) {
    const upload = this.find(owner, runId, uploadId);
    const length = "data" in next ? decodedLength(next.data, upload) : pieceLength(next.size, upload);
    if (offset !== upload.size) throw fail(M.uploadOffset, "ARTIFACT_OFFSET");
    if (upload.size + length > ARTIFACT_MAX_BYTES) {
      this.discard(upload);
      throw fail(M.tooLarge, "ARTIFACT_TOO_LARGE");
    }
    // The size advances before anything is awaited, so a replayed append is refused at once; the file
    // work is chained, so the hash sees the pieces in order (and one scratch buffer serves them all).
    const position = upload.size;
    upload.size += length;
    let work: () => Promise<void>;
    if ("data" in next) {
      work = () => {
        const chunk = Buffer.from(next.data, "base64");
        upload.hash.update(chunk);
        return upload.file.write(chunk, position);
      };
    } else {
      work = async () => {
        // Read and hashed in one go, so one buffer serves every piece of every upload.
        this.scratch ??= Buffer.allocUnsafe(ARTIFACT_PIECE_MAX_BYTES);
        const piece = this.scratch.subarray(0, length);
        if (upload.file.readInto(piece, position) !== length) {
          throw fail(M.handoverChanged, "ARTIFACT_HANDOVER");
        }
        upload.hash.update(piece);
      };
    }
    upload.writing = upload.writing.then(() =>
      work().catch((error) => {
        upload.failed = true;
        throw error;
      }),
    );
    await upload.writing;
    return { upload_id: upload.id, size: upload.size };
  }

  async commit(owner: string, runId: string | null, uploadId: string): Promise<ArtifactReference> {
    const upload = this.find(owner, runId, uploadId);
    this.open.delete(upload.id);
    try {
      await upload.writing;
      if (upload.failed) throw fail("Artifact upload failed while writing; upload it again", "ARTIFACT_IO");
      // The worker must not have written past what it appended: the artifact is exactly what was hashed.
      if (upload.handedOver && (await upload.file.size()) !== upload.size) {
        throw fail(M.handoverChanged, "ARTIFACT_HANDOVER");
      }
      if (upload.format !== "binary") checkContent(await upload.file.read(0, upload.size), upload.format);
    } catch (error) {
      await upload.file.close();
      throw error;
    }
    return this.publish(upload.owner, upload.file, upload.size, upload.hash.digest("hex"), upload.format);
  }

  abort(owner: string, runId: string | null, uploadId: string) {
    this.discard(this.find(owner, runId, uploadId));
    return { upload_id: uploadId, aborted: true };
  }

  /** A cell ended (however it ended): what it left unfinished is dropped. */
  abortRun(owner: string, runId: string): void {
    if (this.open.size === 0) return;
    for (const upload of [...this.open.values()]) {
      if (upload.owner === owner && upload.runId === runId) this.discard(upload);
    }
  }

  abortSession(owner: string): void {
    for (const upload of [...this.open.values()]) if (upload.owner === owner) this.discard(upload);
  }

  abortAll(): void {
    for (const upload of [...this.open.values()]) this.discard(upload);
  }

  private find(owner: string, runId: string | null, uploadId: string): Upload {
    const upload = this.open.get(uploadId);
    if (!upload || upload.owner !== owner || upload.runId !== runId) {
      throw fail(M.uploadUnknown, "ARTIFACT_UPLOAD_UNKNOWN");
    }
    return upload;
  }

  private discard(upload: Upload): void {
    if (this.open.get(upload.id) !== upload) return;
    this.open.delete(upload.id);
    void upload.writing.finally(() => upload.file.close()).catch(() => {});
  }
}

/** A chunk's length once decoded; refuses one that is not base64 of at most 32 KiB, or comes for a file. */
function decodedLength(data: string, upload: Upload): number {
  if (
    upload.handedOver ||
    data.length > ARTIFACT_CHUNK_BASE64_CHARS ||
    data.length % 4 !== 0 ||
    !BASE64.test(data)
  ) {
    throw fail(M.uploadChunk, "ARTIFACT_CHUNK");
  }
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  const length = (data.length / 4) * 3 - padding;
  if (length > ARTIFACT_CHUNK_BYTES) throw fail(M.uploadChunk, "ARTIFACT_CHUNK");
  return length;
}

function pieceLength(size: number, upload: Upload): number {
  if (!upload.handedOver || !Number.isInteger(size) || size < 1 || size > ARTIFACT_PIECE_MAX_BYTES) {
    throw fail(M.uploadPiece, "ARTIFACT_CHUNK");
  }
  return size;
}
