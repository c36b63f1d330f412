// One page's event stream (server-sent events). Events wait in a queue that the socket drains only as
// fast as the page reads (a pull stream with no buffer of its own), counted in bytes: past a first mark
// the page gets no more output (and is told afterwards how much it missed), past the second it is
// dropped. A dropped page reconnects and starts again from a fresh snapshot.
import { VIEWER_STREAM_BACKLOG_MAX_BYTES, VIEWER_STREAM_OUTPUT_SKIP_BYTES } from "../limits.ts";

const encoder = new TextEncoder();

/** One event, encoded once for every page it goes to. */
export function encodeEvent(event: object): Uint8Array {
  // JSON.stringify escapes every line break, so the event is one data line.
  return encoder.encode(`data: ${JSON.stringify(event)}\n\n`);
}

export const KEEPALIVE = encoder.encode(":\n\n");

export class PageStream {
  readonly response: Response;
  private readonly queue: Uint8Array[] = [];
  private bytes = 0;
  /** Output events left out since the page fell behind. */
  private skipped = 0;
  private closed = false;
  private wake: (() => void) | undefined;

  constructor(private readonly onClose: (page: PageStream) => void) {
    const body = new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          while (this.queue.length === 0 && !this.closed) {
            await new Promise<void>((resolve) => {
              this.wake = resolve;
            });
          }
          this.wake = undefined;
          const chunk = this.queue.shift();
          if (chunk) {
            this.bytes -= chunk.length;
            controller.enqueue(chunk);
          } else controller.close();
        },
        cancel: () => this.close(),
      },
      { highWaterMark: 0 },
    );
    this.response = new Response(body, {
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        "x-accel-buffering": "no",
      },
    });
  }

  /**
   * Queues an event. `output` events are the ones a page that fell behind goes without; the next event
   * it does get is preceded by a notice of how many it missed.
   */
  send(bytes: Uint8Array, output = false): void {
    if (this.closed) return;
    if (output && this.bytes > VIEWER_STREAM_OUTPUT_SKIP_BYTES) {
      this.skipped++;
      return;
    }
    if (this.skipped > 0 && this.bytes <= VIEWER_STREAM_OUTPUT_SKIP_BYTES) {
      const missed = this.skipped;
      this.skipped = 0;
      this.push(
        encodeEvent({
          type: "notice",
          text: `This page fell behind: ${missed} output update${missed === 1 ? " was" : "s were"} not sent to it. Each run's final result below is complete.`,
        }),
      );
    }
    this.push(bytes);
    if (this.bytes > VIEWER_STREAM_BACKLOG_MAX_BYTES) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.bytes = 0;
    this.wake?.();
    this.onClose(this);
  }

  private push(bytes: Uint8Array): void {
    this.queue.push(bytes);
    this.bytes += bytes.length;
    this.wake?.();
  }
}
