// The artifact store: whole values kept by the server in private unlinked files, each owned by one
// session. Lookups by another session fail exactly like lookups of missing ids. The store is bounded as
// a whole (entries and bytes); the oldest artifacts are evicted only when a new one commits, so a
// failed import never costs an existing artifact. Whole-content jobs are bounded and never queue: an
// agent is told to retry instead of waiting behind someone else's 16 MiB copy.
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { openedPath } from "../fs/opened-path.ts";
import {
  ARTIFACT_IO_JOBS,
  ARTIFACT_MAX_BYTES,
  ARTIFACT_READ_MAX_BYTES,
  ARTIFACT_STORE_MAX_BYTES,
  ARTIFACT_STORE_MAX_ENTRIES,
} from "../limits.ts";
import { checkContent, fail, sha256Hex } from "./content.ts";
import { PrivateFile } from "./file.ts";
import { type ArtifactFormat, type ArtifactReference, ArtifactMessages as M } from "./reference.ts";
import { saveBeside } from "./save.ts";
import { Uploads } from "./uploads.ts";

export interface StoredArtifact {
  owner: string;
  reference: ArtifactReference;
}

interface Entry extends StoredArtifact {
  file: PrivateFile;
  /** Operations reading the file right now; a removed entry's file closes when the last one ends. */
  pins: number;
  removed: boolean;
}

export class ArtifactStore {
  /** Insertion order is age: the first entry is the oldest. */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private ioJobs = 0;
  private readonly listeners = new Set<() => void>();
  readonly uploads = new Uploads((owner, file, size, sha256, format) =>
    this.adopt(owner, file, size, sha256, format),
  );

  /** Called whenever artifacts appear or go (resources/list_changed). Returns an unsubscribe. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Every artifact, or one session's, oldest first. */
  list(owner?: string): StoredArtifact[] {
    return [...this.entries.values()]
      .filter((entry) => owner === undefined || entry.owner === owner)
      .map(({ owner, reference }) => ({ owner, reference }));
  }

  get totalBytes(): number {
    return this.bytes;
  }

  lookup(owner: string, id: string): ArtifactReference {
    return this.entry(owner, id).reference;
  }

  async createFromBytes(
    owner: string,
    bytes: Uint8Array,
    format: ArtifactFormat,
  ): Promise<ArtifactReference> {
    if (bytes.length > ARTIFACT_MAX_BYTES) throw fail(M.tooLarge, "ARTIFACT_TOO_LARGE");
    checkContent(bytes, format);
    const file = await PrivateFile.create();
    try {
      await file.write(bytes, 0);
    } catch (error) {
      await file.close();
      throw error;
    }
    return this.adopt(owner, file, bytes.length, sha256Hex(bytes), format);
  }

  /** Copies a regular file. FIFOs, sockets and devices are refused without ever blocking on them. */
  /**
   * `opened`, when given, is told the real path of the file actually opened (where the system says it),
   * and may refuse it: a name checked before opening can have become a link to somewhere else since.
   */
  async importFile(
    owner: string,
    path: string,
    format: ArtifactFormat,
    opened?: (realPath: string) => void,
  ): Promise<ArtifactReference> {
    if (!isAbsolute(path)) throw fail(M.needsPath, "ARTIFACT_PATH");
    return this.job(async () => {
      let handle: Awaited<ReturnType<typeof open>>;
      try {
        handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
      } catch (error) {
        // A socket cannot be opened at all (ENXIO): it is not a regular file either.
        if ((error as { code?: string }).code === "ENXIO") throw fail(M.notRegular, "ARTIFACT_NOT_REGULAR");
        throw fail(M.cannotOpen, "ARTIFACT_OPEN");
      }
      try {
        const real = openedPath(handle.fd);
        if (opened && real !== undefined) opened(real);
        const stat = await handle.stat();
        if (!stat.isFile()) throw fail(M.notRegular, "ARTIFACT_NOT_REGULAR");
        if (stat.size > ARTIFACT_MAX_BYTES) throw fail(M.tooLarge, "ARTIFACT_TOO_LARGE");
        // One byte more than the limit tells a file that grew since fstat from one that fits.
        const buffer = Buffer.alloc(ARTIFACT_MAX_BYTES + 1);
        let size = 0;
        for (;;) {
          const { bytesRead } = await handle.read(buffer, size, buffer.length - size, size);
          if (bytesRead === 0) break;
          size += bytesRead;
          if (size > ARTIFACT_MAX_BYTES) throw fail(M.tooLarge, "ARTIFACT_TOO_LARGE");
        }
        return await this.createFromBytes(owner, buffer.subarray(0, size), format);
      } finally {
        await handle.close();
      }
    });
  }

  /** A range: at most 64 KiB, never re-hashed. `offset` may equal the size (an empty range). */
  async read(
    owner: string,
    id: string,
    offset: number,
    length: number,
  ): Promise<{ reference: ArtifactReference; bytes: Uint8Array; hasMore: boolean }> {
    const entry = this.entry(owner, id);
    const { size } = entry.reference;
    if (offset > size || length > ARTIFACT_READ_MAX_BYTES || offset < 0 || length < 0) {
      throw fail(M.range, "ARTIFACT_RANGE");
    }
    const bytes = await this.pinned(entry, () => entry.file.read(offset, Math.min(length, size - offset)));
    return { reference: entry.reference, bytes, hasMore: offset + bytes.length < size };
  }

  /** The whole content, verified against its SHA-256, if it is at most `maxBytes` long. */
  async readWhole(
    owner: string,
    id: string,
    maxBytes: number,
    tooLarge: string,
  ): Promise<{ reference: ArtifactReference; bytes: Uint8Array }> {
    const entry = this.entry(owner, id);
    if (entry.reference.size > maxBytes) throw fail(tooLarge, "ARTIFACT_TOO_LARGE");
    return this.job(() => this.pinned(entry, () => this.verified(entry)));
  }

  /** Writes the verified content to `destination` (see save.ts for the on-disk steps). */
  async save(
    owner: string,
    id: string,
    destination: string,
    overwrite: boolean,
    opened?: (realPath: string) => void,
  ): Promise<ArtifactReference> {
    if (!isAbsolute(destination)) throw fail(M.destinationRelative, "ARTIFACT_PATH");
    const entry = this.entry(owner, id);
    return this.job(() =>
      this.pinned(entry, async () => {
        const { bytes } = await this.verified(entry);
        await saveBeside(destination, bytes, overwrite, opened);
        return entry.reference;
      }),
    );
  }

  delete(owner: string, id: string): ArtifactReference {
    const entry = this.entry(owner, id);
    this.remove(entry);
    this.changed();
    return entry.reference;
  }

  /** A session closed: its artifacts and unfinished uploads go with it. Returns how many artifacts. */
  deleteForSession(owner: string): number {
    this.uploads.abortSession(owner);
    const owned = [...this.entries.values()].filter((entry) => entry.owner === owner);
    for (const entry of owned) this.remove(entry);
    if (owned.length) this.changed();
    return owned.length;
  }

  /** Server exit: every descriptor is closed (the files were never linked, so nothing remains). */
  async close(): Promise<void> {
    this.uploads.abortAll();
    for (const entry of [...this.entries.values()]) this.remove(entry);
  }

  /** Publishes a file holding finished content, then evicts the oldest others over the bounds. */
  adopt(owner: string, file: PrivateFile, size: number, sha256: string, format: ArtifactFormat) {
    const reference: ArtifactReference = {
      id: crypto.randomUUID(),
      size,
      format,
      sha256,
      lifetime: "server",
      eviction: "oldest-first",
    };
    this.entries.set(reference.id, { owner, reference, file, pins: 0, removed: false });
    this.bytes += size;
    for (const entry of this.entries.values()) {
      if (this.entries.size <= ARTIFACT_STORE_MAX_ENTRIES && this.bytes <= ARTIFACT_STORE_MAX_BYTES) break;
      if (entry.reference.id !== reference.id) this.remove(entry);
    }
    this.changed();
    return reference;
  }

  private entry(owner: string, id: string): Entry {
    const entry = this.entries.get(id);
    if (!entry || entry.owner !== owner) throw fail(M.unknown, "ARTIFACT_UNKNOWN");
    return entry;
  }

  private remove(entry: Entry): void {
    if (entry.removed) return;
    entry.removed = true;
    this.entries.delete(entry.reference.id);
    this.bytes -= entry.reference.size;
    if (entry.pins === 0) void entry.file.close();
  }

  private async verified(entry: Entry): Promise<{ reference: ArtifactReference; bytes: Uint8Array }> {
    const bytes = await entry.file.read(0, entry.reference.size);
    if (bytes.length !== entry.reference.size || sha256Hex(bytes) !== entry.reference.sha256) {
      throw fail(M.hashMismatch, "ARTIFACT_CORRUPT");
    }
    return { reference: entry.reference, bytes };
  }

  /** Keeps the descriptor open while `work` uses it, even if the artifact is deleted meanwhile. */
  private async pinned<T>(entry: Entry, work: () => Promise<T>): Promise<T> {
    entry.pins++;
    try {
      return await work();
    } finally {
      entry.pins--;
      if (entry.removed && entry.pins === 0) void entry.file.close();
    }
  }

  private async job<T>(work: () => Promise<T>): Promise<T> {
    if (this.ioJobs >= ARTIFACT_IO_JOBS) throw fail(M.ioCapacity, "ARTIFACT_BUSY");
    this.ioJobs++;
    try {
      return await work();
    } finally {
      this.ioJobs--;
    }
  }

  private changed(): void {
    for (const listener of this.listeners) {
      try {
        listener();
      } catch {
        // A listener's failure (a closed client) must not fail the store operation.
      }
    }
  }
}
