import { expect, test } from "bun:test";
import { PREVIEW_TRUNCATED_NOTE, render } from "../../src/server/render.ts";
import { cutUtf8, tailUtf8, utf8Bytes } from "../../src/text/utf8.ts";

test("utf8Bytes counts like TextEncoder", () => {
  for (const sample of ["", "ascii", "é", "Ж".repeat(10), "😀x", "\ud800"]) {
    expect(utf8Bytes(sample)).toBe(new TextEncoder().encode(sample).length);
  }
});

test("cutUtf8 never splits a character", () => {
  const cut = cutUtf8("ЖЖЖ", 5);
  expect(cut).toEqual({ text: "ЖЖ", cut: true });
  expect(cutUtf8("abc", 3)).toEqual({ text: "abc", cut: false });
  expect(cutUtf8("😀😀", 5).text).toBe("😀");
});

test("execution results render stdout, stderr, value, error and cleared state in order", () => {
  const result = render({
    success: false,
    stdout: "out",
    stderr: "err",
    return_value: "42",
    error: "boom",
    state: "cleared",
  });
  expect(result.content[0]?.text).toBe("out\nStderr:\nerr\n42\nboom\nWorker state cleared.");
  expect(result.isError).toBe(true);
  expect(
    render({ success: true, stdout: "", stderr: "", return_value: null, error: null }).content[0]?.text,
  ).toBe("Execution completed.");
});

test("other values render as JSON; isError follows success, error and isError", () => {
  expect(render({ a: 1 })).toMatchObject({ content: [{ text: '{"a":1}' }], isError: false });
  expect(render({ error: "no" }).isError).toBe(true);
  expect(render({ error: null }).isError).toBe(false);
  expect(render({ isError: true }).isError).toBe(true);
});

test("long text is cut at 8 KiB with a note; huge results drop the text entirely", () => {
  const long = render({
    success: true,
    stdout: "é".repeat(10_000),
    stderr: "",
    return_value: null,
    error: null,
  });
  expect(long.content[0]?.text.endsWith(PREVIEW_TRUNCATED_NOTE)).toBe(true);
  expect(long.structuredContent.text_truncated).toBe(true);
  const huge = render({
    success: true,
    stdout: "\0".repeat(200_000),
    stderr: "",
    return_value: null,
    error: null,
  });
  expect(huge.content[0]?.text).toBe("Output presentation omitted; inspect structuredContent.");
});

test("tailUtf8 keeps the newest bytes and never splits a character", () => {
  expect(tailUtf8("abcdef", 3)).toBe("def");
  expect(tailUtf8("ЖЖЖ", 5)).toBe("ЖЖ");
  expect(tailUtf8("😀😀", 5)).toBe("😀");
  expect(tailUtf8("short", 512)).toBe("short");
});
