// Newline-delimited framing over byte streams. The size limit is checked on bytes as they arrive,
// before anything is decoded or parsed, so an oversized or never-ending line cannot grow memory.

export class FrameTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`frame exceeds ${limitBytes} bytes`);
    this.name = "FrameTooLargeError";
  }
}

const NEWLINE = 0x0a;

export class LineSplitter {
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;

  /** `maxBytes` counts the line including its newline. */
  constructor(private readonly maxBytes: number) {}

  /** Splits a chunk into complete lines (without the newline); throws FrameTooLargeError past the limit. */
  push(chunk: Uint8Array): Uint8Array[] {
    const lines: Uint8Array[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl === -1) break;
      const pieceBytes = nl - start;
      if (this.pendingBytes + pieceBytes + 1 > this.maxBytes) throw new FrameTooLargeError(this.maxBytes);
      lines.push(this.take(chunk.subarray(start, nl)));
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (this.pendingBytes + rest.length >= this.maxBytes) throw new FrameTooLargeError(this.maxBytes);
      // Copy: the caller may reuse the chunk's buffer.
      this.pending.push(rest.slice());
      this.pendingBytes += rest.length;
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
