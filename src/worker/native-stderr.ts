// The worker's fd 2 carries whatever C code, child processes or os.write(1/2, ...) produce. It is
// drained continuously (an unread pipe would stall the worker), kept up to a bound per run, and split
// at the barrier marker the worker writes after each cell, so a result gets exactly its own output.
import { NATIVE_STDERR_MAX_BYTES } from "../limits.ts";
import { BARRIER_PREFIX } from "./frames.ts";

const RS = 0x1e;
const NL = 0x0a;
const MARKER_MAX_BYTES = 160;
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PREFIX = encoder.encode(BARRIER_PREFIX);

function startsWith(data: Uint8Array, at: number, prefix: Uint8Array): boolean {
  if (data.length - at < prefix.length) return false;
  return agrees(data, at, prefix, prefix.length);
}

/** Whether the first `n` bytes at `at` equal the first `n` of `prefix`. */
function agrees(data: Uint8Array, at: number, prefix: Uint8Array, n: number): boolean {
  for (let i = 0; i < n; i++) if (data[at + i] !== prefix[i]) return false;
  return true;
}

export class NativeStderr {
  private parts: Uint8Array[] = [];
  private bytes = 0;
  private dropped = false;
  private carry: Uint8Array | undefined;
  private seen = new Set<string>();
  private waiter: { id: string; resolve: () => void } | undefined;
  private ended = false;

  private reader: { cancel(): Promise<void> } | undefined;

  /** For a worker whose fd 2 the server cannot see (a kernel's): always empty, never waited for. */
  static unseen(): NativeStderr {
    const stderr = new NativeStderr();
    stderr.ended = true;
    return stderr;
  }

  async drain(stream: ReadableStream<Uint8Array>): Promise<void> {
    const reader = stream.getReader();
    this.reader = reader;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.push(value);
      }
    } catch {}
    this.ended = true;
    this.waiter?.resolve();
  }

  /** Bytes that reached the server another way: a keeping guardian relays them in order with the frames. */
  feed(chunk: Uint8Array): void {
    this.push(chunk);
  }

  /** No more bytes will come (the relay ended). */
  finish(): void {
    this.ended = true;
    this.waiter?.resolve();
  }

  /** Stops reading (the pipe may be held open by a process that is not ours to wait for). */
  stop(): void {
    void this.reader?.cancel().catch(() => {});
  }

  /** Starts a new run's capture. */
  reset(): void {
    this.parts = [];
    this.bytes = 0;
    this.dropped = false;
    this.seen.clear();
  }

  /** Resolves once the worker's barrier for `id` went through, the pipe ended, or the time is up. */
  barrier(id: string, timeoutMs: number): Promise<void> {
    if (this.seen.has(id) || this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      const waiter = { id, resolve: done };
      this.waiter = waiter;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    });
  }

  /** The captured text and whether anything was dropped past the bound; starts a new capture. */
  take(): { text: string; truncated: boolean } {
    const result = { text: this.peek(), truncated: this.dropped };
    this.reset();
    return result;
  }

  /** The text captured so far, for live polling. */
  peek(): string {
    if (this.bytes === 0) return "";
    if (this.parts.length === 1) return decoder.decode(this.parts[0]);
    const joined = new Uint8Array(this.bytes);
    let offset = 0;
    for (const part of this.parts) {
      joined.set(part, offset);
      offset += part.length;
    }
    return decoder.decode(joined);
  }

  private push(chunk: Uint8Array): void {
    let data = chunk;
    if (this.carry) {
      data = new Uint8Array(this.carry.length + chunk.length);
      data.set(this.carry);
      data.set(chunk, this.carry.length);
      this.carry = undefined;
    }
    let start = 0;
    for (;;) {
      const at = data.indexOf(RS, start);
      if (at === -1) break;
      const remaining = data.length - at;
      const end = data.indexOf(NL, at);
      if (
        end === -1 &&
        remaining < MARKER_MAX_BYTES &&
        agrees(data, at, PREFIX, Math.min(remaining, PREFIX.length))
      ) {
        // Possibly a marker cut by the read boundary: decide when the rest arrives.
        this.keep(data.subarray(start, at));
        this.carry = data.slice(at);
        return;
      }
      if (end !== -1 && end - at < MARKER_MAX_BYTES && startsWith(data, at, PREFIX) && data[end - 1] === RS) {
        this.keep(data.subarray(start, at));
        const id = decoder.decode(data.subarray(at + PREFIX.length, end - 1));
        this.seen.add(id);
        if (this.waiter?.id === id) this.waiter.resolve();
        start = end + 1;
        continue;
      }
      this.keep(data.subarray(start, at + 1));
      start = at + 1;
    }
    this.keep(data.subarray(start));
  }

  private keep(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    const room = NATIVE_STDERR_MAX_BYTES - this.bytes;
    if (room <= 0) {
      this.dropped = true;
      return;
    }
    const piece = bytes.length > room ? bytes.slice(0, room) : bytes.slice();
    if (bytes.length > room) this.dropped = true;
    this.parts.push(piece);
    this.bytes += piece.length;
  }
}
