import { expect, test } from "bun:test";
import { BARRIER_PREFIX } from "../../src/worker/frames.ts";
import { NativeStderr } from "../../src/worker/native-stderr.ts";

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
      controller.close();
    },
  });
}

const marker = (id: string) => `${BARRIER_PREFIX}${id}\x1e\n`;

test("the barrier marker is removed and splits runs, even when cut across reads", async () => {
  const stderr = new NativeStderr();
  const whole = `before${marker("run-1")}after`;
  const cutAt = whole.indexOf("run-1") + 2;
  const barrier = stderr.barrier("run-1", 5_000);
  await stderr.drain(streamOf([whole.slice(0, cutAt), whole.slice(cutAt)]));
  await barrier;
  // The drain ran to the end, so both runs' text is buffered; the marker itself never shows.
  expect(stderr.take()).toEqual({ text: "beforeafter", truncated: false });
});

test("text with a stray record separator is kept as is", async () => {
  const stderr = new NativeStderr();
  await stderr.drain(streamOf(["a\x1eb\n", "c"]));
  expect(stderr.take().text).toBe("a\x1eb\nc");
});

test("capture is bounded at 64 KiB and reports the cut", async () => {
  const stderr = new NativeStderr();
  await stderr.drain(streamOf(["x".repeat(70_000)]));
  const taken = stderr.take();
  expect(taken.text.length).toBe(65_536);
  expect(taken.truncated).toBe(true);
});
