// A page that stops reading its event stream: past the first mark it gets no more output (and is told how
// much it missed once it catches up), past the second it is dropped; nothing is buffered beyond that.
import { expect, test } from "bun:test";
import { VIEWER_STREAM_BACKLOG_MAX_BYTES, VIEWER_STREAM_OUTPUT_SKIP_BYTES } from "../../src/limits.ts";
import { encodeEvent, PageStream } from "../../src/viewer/stream.ts";

const chunk = (bytes: number) => encodeEvent({ type: "run", pad: "x".repeat(bytes) });

test("output is skipped past the first mark and the page is told how much once it reads again", async () => {
  let dropped = false;
  const page = new PageStream(() => {
    dropped = true;
  });
  page.send(chunk(VIEWER_STREAM_OUTPUT_SKIP_BYTES + 10));
  page.send(encodeEvent({ type: "output", stdout: "lost" }), true);
  page.send(encodeEvent({ type: "output", stdout: "lost too" }), true);
  expect(dropped).toBe(false);
  const reader = (page.response.body as ReadableStream<Uint8Array>).getReader();
  await reader.read(); // the large event leaves: the page has caught up
  page.send(encodeEvent({ type: "output", stdout: "kept" }), true);
  const decoder = new TextDecoder();
  const next = decoder.decode((await reader.read()).value);
  expect(next).toContain("2 output updates were not sent to it");
  expect(decoder.decode((await reader.read()).value)).toContain('"stdout":"kept"');
  page.close();
});

test("a page that never reads is dropped once its backlog passes the bound", () => {
  let dropped = false;
  const page = new PageStream(() => {
    dropped = true;
  });
  const size = 65_536;
  let sent = 0;
  while (!dropped && sent < 2 * VIEWER_STREAM_BACKLOG_MAX_BYTES) {
    page.send(chunk(size));
    sent += size;
  }
  expect(dropped).toBe(true);
  expect(sent).toBeLessThanOrEqual(VIEWER_STREAM_BACKLOG_MAX_BYTES + 2 * size);
});
