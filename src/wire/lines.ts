// Newline-delimited framing over byte streams. The size limit is checked on bytes as they arrive,
// before anything is decoded or parsed, so an oversized or never-ending line cannot grow memory.

export class FrameTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`frame exceeds ${limitBytes} bytes`);
    this.name = "FrameTooLargeError";
  }
}

const NEWLINE = 0x0a;

/** Stands in for a line that went over the limit and was dropped. */
export const OVERSIZED = Symbol("oversized line");
export type SplitLine = Uint8Array | typeof OVERSIZED;

/**
 * Splits a byte stream into lines without their newline. A line over the limit is reported once, as
 * soon as it crosses the limit, and its bytes are dropped up to and including its newline unbuffered.
 */
export class SkippingLineSplitter {
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private skipping = false;

  /** `maxBytes` counts the line including its newline. */
  constructor(private readonly maxBytes: number) {}

  push(chunk: Uint8Array): SplitLine[] {
    const lines: SplitLine[] = [];
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl === -1 ? chunk.length : nl;
      if (!this.skipping) {
        // A complete line may use the whole limit; an unterminated one still needs room for its newline.
        const bytes = this.pendingBytes + (end - start) + (nl === -1 ? 0 : 1);
        if (nl === -1 ? bytes >= this.maxBytes : bytes > this.maxBytes) {
          lines.push(OVERSIZED);
          this.pending = [];
          this.pendingBytes = 0;
          this.skipping = true;
        } else if (nl === -1) {
          // Copy: the caller may reuse the chunk's buffer.
          this.pending.push(chunk.slice(start));
          this.pendingBytes += chunk.length - start;
        } else {
          lines.push(this.take(chunk.subarray(start, nl)));
        }
      }
      if (nl === -1) break;
      this.skipping = false;
      start = nl + 1;
    }
    return lines;
  }

  /** Bytes of an unterminated final line, if any. */
  get partialBytes(): number {
    return this.pendingBytes;
  }

  private take(tail: Uint8Array): Uint8Array {
    if (this.pending.length === 0) return tail;
    const line = new Uint8Array(this.pendingBytes + tail.length);
    let offset = 0;
    for (const part of this.pending) {
      line.set(part, offset);
      offset += part.length;
    }
    line.set(tail, offset);
    this.pending = [];
    this.pendingBytes = 0;
    return line;
  }
}

/** The strict form for private channels, where an over-long line means the other side is broken. */
export class LineSplitter {
  private readonly inner: SkippingLineSplitter;

  constructor(private readonly maxBytes: number) {
    this.inner = new SkippingLineSplitter(maxBytes);
  }

  /** Splits a chunk into complete lines (without the newline); throws FrameTooLargeError past the limit. */
  push(chunk: Uint8Array): Uint8Array[] {
    const lines = this.inner.push(chunk);
    if (lines.includes(OVERSIZED)) throw new FrameTooLargeError(this.maxBytes);
    return lines as Uint8Array[];
  }

  get partialBytes(): number {
    return this.inner.partialBytes;
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

export function decodeLine(line: Uint8Array): string {
  return decoder.decode(line);
}

/** Serializes one frame; throws FrameTooLargeError when it would not fit. */
export function encodeFrame(value: unknown, maxBytes: number): Uint8Array {
  const bytes = encoder.encode(`${JSON.stringify(value)}\n`);
  if (bytes.length > maxBytes) throw new FrameTooLargeError(maxBytes);
  return bytes;
}

/** Reads a byte stream as lines; resolves when it ends. Errors (including oversize) reject. */
export async function readLines(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  onLine: (line: Uint8Array) => void,
): Promise<void> {
  const splitter = new LineSplitter(maxBytes);
  for await (const chunk of stream) {
    for (const line of splitter.push(chunk)) onLine(line);
  }
}
