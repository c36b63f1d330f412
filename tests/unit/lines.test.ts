import { expect, test } from "bun:test";
import {
  encodeFrame,
  FrameTooLargeError,
  LineSplitter,
  OVERSIZED,
  SkippingLineSplitter,
} from "../../src/wire/lines.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (lines: Uint8Array[]) => lines.map((line) => new TextDecoder().decode(line));

test("lines split across chunks are joined, several per chunk are split", () => {
  const splitter = new LineSplitter(64);
  expect(text(splitter.push(bytes("ab")))).toEqual([]);
  expect(text(splitter.push(bytes("c\nde\nf")))).toEqual(["abc", "de"]);
  expect(splitter.partialBytes).toBe(1);
  expect(text(splitter.push(bytes("\n")))).toEqual(["f"]);
});

test("the limit counts the newline and is enforced before the line completes", () => {
  const exact = new LineSplitter(4);
  expect(text(exact.push(bytes("abc\n")))).toEqual(["abc"]);
  expect(() => new LineSplitter(4).push(bytes("abcd\n"))).toThrow(FrameTooLargeError);
  // An endless line is refused as soon as it reaches the limit, without waiting for a newline.
  const endless = new LineSplitter(8);
  endless.push(bytes("abcd"));
  expect(() => endless.push(bytes("efgh"))).toThrow(FrameTooLargeError);
});

test("encodeFrame refuses frames over the limit", () => {
  expect(new TextDecoder().decode(encodeFrame({ a: 1 }, 100))).toBe('{"a":1}\n');
  expect(() => encodeFrame({ a: "x".repeat(100) }, 50)).toThrow(FrameTooLargeError);
});

test("the skipping splitter reports an over-long line once and keeps the lines around it", () => {
  const splitter = new SkippingLineSplitter(8);
  const seen = (chunk: string) =>
    splitter
      .push(bytes(chunk))
      .map((line) => (line === OVERSIZED ? "<oversized>" : new TextDecoder().decode(line)));
  expect(seen("ok\nabcdefgh")).toEqual(["ok", "<oversized>"]);
  // The rest of the long line is dropped without being kept, whatever its length.
  expect(seen("x".repeat(10_000))).toEqual([]);
  expect(splitter.partialBytes).toBe(0);
  expect(seen("yy\nnext\n")).toEqual(["next"]);
  expect(seen("123456789\nz\n")).toEqual(["<oversized>", "z"]);
  expect(seen("1234567\n")).toEqual(["1234567"]);
});
