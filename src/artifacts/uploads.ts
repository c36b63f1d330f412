// Uploads of values from cells: begin, appends of ≤ 32 KiB chunks at the current size, then commit (or
// abort). Each upload belongs to the session and the run that began it, writes straight into a private
// file and hashes as it goes, so committing a 16 MiB value costs no second pass over binary content.
import {
  ARTIFACT_CHUNK_BASE64_CHARS,
  ARTIFACT_CHUNK_BYTES,
  ARTIFACT_MAX_BYTES,
  ARTIFACT_UPLOADS_MAX,
} from "../limits.ts";
import { checkContent, fail } from "./content.ts";
import { PrivateFile } from "./file.ts";
import { type ArtifactFormat, type ArtifactReference, ArtifactMessages as M } from "./reference.ts";
import type { ArtifactStore } from "./store.ts";

interface Upload {
  id: string;
  owner: string;
  runId: string | null;
  format: ArtifactFormat;
  file: PrivateFile;
  size: number;
  hash: Bun.CryptoHasher;
  /** Appends are written in order; commit waits for the last one. */
  writing: Promise<void>;
  failed: boolean;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export class Uploads {
  private readonly open = new Map<string, Upload>();
  /** Slots taken by begins still creating their file. */
  private starting = 0;

  constructor(private readonly store: ArtifactStore) {}

  get unfinished(): number {
    return this.open.size + this.starting;
  }

  async begin(owner: string, runId: string | null, format: ArtifactFormat) {
    if (this.unfinished >= ARTIFACT_UPLOADS_MAX) throw fail(M.uploadCapacity, "ARTIFACT_UPLOADS");
    this.starting++;
    let file: PrivateFile;
    try {
      file = await PrivateFile.create();
    } finally {
      this.starting--;
    }
    const upload: Upload = {
      id: crypto.randomUUID(),
      owner,
      runId,
      format,
      file,
      size: 0,
      hash: new Bun.CryptoHasher("sha256"),
      writing: Promise.resolve(),
      failed: false,
    };
    this.open.set(upload.id, upload);
    return { upload_id: upload.id, chunk_bytes: ARTIFACT_CHUNK_BYTES, max_bytes: ARTIFACT_MAX_BYTES };
  }

  async append(owner: string, runId: string | null, uploadId: string, offset: number, data: string) {
    const upload = this.find(owner, runId, uploadId);
    if (data.length > ARTIFACT_CHUNK_BASE64_CHARS || data.length % 4 !== 0 || !BASE64.test(data)) {
      throw fail(M.uploadChunk, "ARTIFACT_CHUNK");
    }
    const chunk = Buffer.from(data, "base64");
    if (chunk.length > ARTIFACT_CHUNK_BYTES) throw fail(M.uploadChunk, "ARTIFACT_CHUNK");
    if (offset !== upload.size) throw fail(M.uploadOffset, "ARTIFACT_OFFSET");
    if (upload.size + chunk.length > ARTIFACT_MAX_BYTES) {
      this.discard(upload);
      throw fail(M.tooLarge, "ARTIFACT_TOO_LARGE");
    }
    // Size and hash advance before the write is awaited, so a replayed append is refused at once.
    const position = upload.size;
    upload.size += chunk.length;
    upload.hash.update(chunk);
    upload.writing = upload.writing.then(() =>
      upload.file.write(chunk, position).catch((error) => {
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
      if (upload.format !== "binary") checkContent(await upload.file.read(0, upload.size), upload.format);
    } catch (error) {
      await upload.file.close();
      throw error;
    }
    return this.store.adopt(upload.owner, upload.file, upload.size, upload.hash.digest("hex"), upload.format);
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
