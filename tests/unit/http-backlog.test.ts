// A client that stops reading its event stream: the server hands bytes to the socket only as the client
// reads, and cuts the stream once what waits passes the budget, instead of buffering without end.
import { expect, test } from "bun:test";
import { connect } from "node:net";
import { Backlog, metered } from "../../src/server/http/backlog.ts";
import { waitFor } from "../support/harness.ts";

const BUDGET = 1_048_576;

/** Like the SDK's streams: pushes on its own schedule (64 KiB a millisecond) and ignores backpressure. */
function source(total: number, produced: { bytes: number }): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const timer = setInterval(() => {
        if (produced.bytes >= total) {
          clearInterval(timer);
          return controller.close();
        }
        try {
          controller.enqueue(new Uint8Array(65_536).fill((produced.bytes / 65_536) & 0xff));
          produced.bytes += 65_536;
        } catch {
          clearInterval(timer);
        }
      }, 1);
    },
  });
}

test("a stalled reader is cut once the backlog passes its budget", async () => {
  let overflows = 0;
  const backlog = new Backlog(BUDGET, () => overflows++);
  const produced = { bytes: 0 };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => new Response(metered(source(256 * 1_048_576, produced), backlog)),
  });
  const socket = connect(server.port as number, "127.0.0.1", () => {
    socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    socket.pause();
  });
  try {
    await waitFor(() => overflows > 0, { timeoutMs: 20_000, what: "the stalled stream to be cut" });
    // What the kernel's socket buffers took, plus the budget: nowhere near the 256 MiB on offer.
    expect(produced.bytes).toBeLessThan(64 * 1_048_576);
    expect(backlog.bytes).toBe(0);
  } finally {
    socket.destroy();
    server.stop(true);
  }
});

test("a reader that keeps reading gets everything, in order, within the budget", async () => {
  let overflows = 0;
  const backlog = new Backlog(BUDGET, () => overflows++);
  const produced = { bytes: 0 };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => new Response(metered(source(16 * 1_048_576, produced), backlog)),
  });
  try {
    const body = await (await fetch(`http://127.0.0.1:${server.port}/`)).arrayBuffer();
    expect(body.byteLength).toBe(16 * 1_048_576);
    const bytes = new Uint8Array(body);
    for (let chunk = 0; chunk < 256; chunk++) expect(bytes[chunk * 65_536 + 65_535]).toBe(chunk & 0xff);
    expect(overflows).toBe(0);
    expect(backlog.bytes).toBe(0);
  } finally {
    server.stop(true);
  }
});
