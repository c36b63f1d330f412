// What a run showed with display() or matplotlib, in order: images assembled from the worker's base64
// chunks, and text. The first displays that fit the per-result limits are inlined; the rest are set
// aside (kept as artifacts when the session can store them, else only described).
import {
  DISPLAY_ARTIFACTS_PER_RUN,
  DISPLAY_IMAGE_ASSEMBLY_MAX_BYTES,
  DISPLAY_IMAGE_INLINE_MAX_BYTES,
  DISPLAY_IMAGES_RESPONSE_MAX_BYTES,
  DISPLAY_SET_ASIDE_MAX_BYTES,
  DISPLAYS_INLINE_MAX,
} from "../limits.ts";
import { utf8Bytes } from "../text/utf8.ts";
import type { DisplayFrame } from "./frames.ts";
import type { Display } from "./result.ts";

/** A display as the server keeps it: images carry their base64 data until they are rendered or stored. */
export type DisplayRecord = Display & { data?: string };

/** Keeps a set-aside display (its bytes, already decoded) and returns the artifact reference. */
export type KeepDisplay = (
  bytes: Uint8Array,
  format: "binary" | "text",
) => Promise<NonNullable<Display["artifact"]>>;

export class Displays {
  private readonly records: DisplayRecord[] = [];
  private pending: { mime: string; bytes: number; chunks: string[]; size: number } | undefined;
  private inlined = 0;
  private imageBytes = 0;
  private asideKept = 0;
  private asideBytes = 0;

  add(frame: DisplayFrame): void {
    if (frame.text !== undefined) {
      this.accept({ mime: frame.mime, bytes: utf8Bytes(frame.text), text: frame.text });
      return;
    }
    this.pending ??= { mime: frame.mime, bytes: frame.bytes ?? 0, chunks: [], size: 0 };
    const pending = this.pending;
    const data = frame.data ?? "";
    pending.size += data.length;
    if (pending.size <= DISPLAY_IMAGE_ASSEMBLY_MAX_BYTES) pending.chunks.push(data);
    if (frame.more) return;
    this.pending = undefined;
    if (pending.size > DISPLAY_IMAGE_ASSEMBLY_MAX_BYTES) {
      this.records.push({ mime: pending.mime, bytes: pending.bytes, inline: false });
      return;
    }
    this.accept({ mime: pending.mime, bytes: pending.bytes, data: pending.chunks.join("") });
  }

  /** The displays so far, in order; undefined when there are none (the result then has no field). */
  list(): DisplayRecord[] | undefined {
    return this.records.length ? [...this.records] : undefined;
  }

  /**
   * Turns the set-aside displays that kept their content into artifacts. Only inline images keep their
   * data afterwards; a display that could not be stored is still listed, without an artifact.
   */
  static async keepAside(records: DisplayRecord[], keep: KeepDisplay | undefined): Promise<DisplayRecord[]> {
    const kept: DisplayRecord[] = [];
    for (const record of records) {
      if (record.inline) {
        kept.push(record);
        continue;
      }
      const { data, ...listed } = record;
      const content = data !== undefined ? Buffer.from(data, "base64") : undefined;
      const text = content === undefined && listed.text !== undefined ? Buffer.from(listed.text) : undefined;
      const bytes = content ?? text;
      if (!keep || !bytes) {
        kept.push(listed);
        continue;
      }
      try {
        kept.push({ ...listed, artifact: await keep(bytes, content ? "binary" : "text") });
      } catch {
        kept.push(listed);
      }
    }
    return kept;
  }

  /**
   * Takes a finished run's inline pictures out of memory: each becomes an artifact, or is only described
   * if it cannot be stored. Text displays stay as they are (their text is part of the result anyway).
   */
  static async archive(records: DisplayRecord[], keep: KeepDisplay | undefined): Promise<DisplayRecord[]> {
    const archived: DisplayRecord[] = [];
    for (const record of records) {
      if (!record.inline || record.data === undefined) {
        archived.push(record);
        continue;
      }
      const { data, ...listed } = record;
      const moved: DisplayRecord = { ...listed, inline: false, archived: true };
      try {
        if (!keep) throw new Error("no artifact store");
        archived.push({ ...moved, artifact: await keep(Buffer.from(data, "base64"), "binary") });
      } catch {
        archived.push(moved);
      }
    }
    return archived;
  }

  private accept(record: Omit<DisplayRecord, "inline">): void {
    const size = record.data?.length ?? 0;
    const fits =
      this.inlined < DISPLAYS_INLINE_MAX &&
      size <= DISPLAY_IMAGE_INLINE_MAX_BYTES &&
      this.imageBytes + size <= DISPLAY_IMAGES_RESPONSE_MAX_BYTES;
    if (!fits) {
      // Only the first few set-aside displays keep their content, to become artifacts at the end.
      const weight = record.data?.length ?? utf8Bytes(record.text ?? "");
      const keep =
        this.asideKept < DISPLAY_ARTIFACTS_PER_RUN && this.asideBytes + weight <= DISPLAY_SET_ASIDE_MAX_BYTES;
      if (keep) {
        this.asideKept++;
        this.asideBytes += weight;
        this.records.push({ ...record, inline: false });
      } else {
        this.records.push({ mime: record.mime, bytes: record.bytes, inline: false });
      }
      return;
    }
    this.inlined++;
    this.imageBytes += size;
    this.records.push({ ...record, inline: true });
  }
}
