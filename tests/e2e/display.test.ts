// display() and pictures: hooks in order, image blocks after the text block, structuredContent.displays,
// the inline limits, and the safe-preview rule for trailing values. Runs everywhere with a stdlib-only
// object whose _repr_png_ writes a tiny PNG.
import { expect, test } from "bun:test";
import { sessionPerTest } from "../support/harness.ts";

// One server for the file; each test runs in a session (a worker and a project) of its own.
const h = sessionPerTest();

/** Defines tiny_png(w, h) and Pic (a stdlib-only object whose _repr_png_ returns a real PNG). */
const PIC = `
import struct, zlib
def tiny_png(w=2, h=2):
    raw = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * w for _ in range(h))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
class Pic:
    def __init__(self, w=2, h=2, payload=None):
        self.w, self.h, self.payload = w, h, payload
    def _repr_png_(self):
        return self.payload if self.payload is not None else tiny_png(self.w, self.h)
`;

type Block = { type: string; text?: string; data?: string; mimeType?: string };

async function cell(code: string) {
  const result = await h.call("execute_python", { code });
  return { ...result, content: result.content as Block[] };
}

function pngWidth(base64: string): number {
  return Buffer.from(base64, "base64").readUInt32BE(16);
}

test("display() of an object with _repr_png_ comes back as an image block after the text block", async () => {
  await h.run(PIC);
  const result = await cell("print('before')\ndisplay(Pic(3, 1))\nprint('after')");
  expect(result.isError).toBe(false);
  expect(result.content[0]).toEqual({ type: "text", text: "before\nafter\n" });
  expect(result.content[1]?.type).toBe("image");
  expect(result.content[1]?.mimeType).toBe("image/png");
  const png = Buffer.from(result.content[1]?.data as string, "base64");
  expect(png.subarray(1, 4).toString()).toBe("PNG");
  expect(pngWidth(result.content[1]?.data as string)).toBe(3);
  expect(result.structuredContent.displays).toEqual([{ mime: "image/png", bytes: png.length, inline: true }]);
  // python_run on the finished run returns the same content.
  const again = await h.call("python_run", { run_id: result.structuredContent.run_id });
  expect(again.content as Block[]).toEqual(result.content);
  expect(again.structuredContent).toEqual(result.structuredContent);
});

test("hooks are tried in order; one that raises or returns the wrong type falls through", async () => {
  const result = await cell(`
class Broken:
    def _repr_png_(self): raise ValueError("no png today")
    def _repr_jpeg_(self): return "not bytes"
    def _repr_svg_(self): return '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'
class Notes:
    def _repr_png_(self): return None
    def _repr_markdown_(self): return "**bold** text"
class Plain:
    def __repr__(self): return "Plain(42)"
class Huge:
    def __repr__(self): return "x" * 100_000
display(Broken(), Notes(), Plain(), Huge())
'done'`);
  expect(result.isError).toBe(false);
  expect(result.structuredContent.value).toBe("done");
  expect(result.structuredContent.stderr).toContain("display(): Broken._repr_png_ failed (no png today)");
  const blocks = result.content.slice(1);
  expect(blocks.map((block) => block.type)).toEqual(["image", "text", "text", "text"]);
  expect(blocks[0]?.mimeType).toBe("image/svg+xml");
  expect(Buffer.from(blocks[0]?.data as string, "base64").toString()).toContain("<svg");
  expect(blocks[1]?.text).toBe("**bold** text");
  expect(blocks[2]?.text).toBe("Plain(42)");
  expect(new TextEncoder().encode(blocks[3]?.text).length).toBeLessThanOrEqual(20_000);
  expect(result.structuredContent.displays.map((d: { mime: string }) => d.mime)).toEqual([
    "image/svg+xml",
    "text/markdown",
    "text/plain",
    "text/plain",
  ]);
});

test("a trailing value is never displayed implicitly: no hook runs, no picture", async () => {
  await h.run(PIC);
  const result = await cell(
    "class Loud(Pic):\n    def _repr_png_(self):\n        print('HOOK RAN')\n        return tiny_png()\nLoud()",
  );
  expect(result.content.length).toBe(1);
  expect(result.structuredContent.displays).toBeUndefined();
  expect(result.structuredContent.stdout).toBe("");
  expect(result.structuredContent.return_value).toContain("safe preview omitted");
});

test("display is in every cell's namespace and shadowing it lasts one cell", async () => {
  expect((await h.run("display = 5\ndisplay")).value).toBe(5);
  expect((await h.run("callable(display)")).value).toBe(true);
});

test("beyond 8 displays, or over the size limits, pictures become artifacts with a link and a sentence", async () => {
  await h.run(PIC);
  const many = await cell("for i in range(10):\n    display(Pic(i + 1, 1))");
  const images = many.content.filter((block) => block.type === "image");
  expect(images.length).toBe(8);
  const displays = many.structuredContent.displays as Array<{ inline: boolean; artifact?: { id: string } }>;
  expect(displays.length).toBe(10);
  const aside = displays.filter((display) => !display.inline);
  expect(aside.length).toBe(2);
  const links = many.content.filter((block) => block.type === "resource_link") as Array<
    Block & { uri: string }
  >;
  expect(links.length).toBe(2);
  expect(links[0]?.mimeType).toBe("image/png");
  const text = many.content[0]?.text as string;
  expect(text).toContain("2 displays not shown inline");
  for (const display of aside) {
    expect(text).toContain(display.artifact?.id as string);
    expect(links.some((link) => link.uri.endsWith(display.artifact?.id as string))).toBe(true);
  }
  // The artifact holds the ninth picture, 9 pixels wide.
  const read = await h.call("artifact_read", {
    session_id: many.structuredContent.session_id,
    id: aside[0]?.artifact?.id,
    encoding: "base64",
  });
  expect(pngWidth(read.structuredContent.content)).toBe(9);
  const resource = await h.server.client.readResource({ uri: links[1]?.uri as string });
  expect(pngWidth((resource.contents[0] as { blob: string }).blob)).toBe(10);

  // 450 KiB of bytes is 600 KiB in base64: over the 512 KiB per-image limit.
  const big = await cell("import os\ndisplay(Pic(payload=os.urandom(450 * 1024)), Pic())");
  expect(big.structuredContent.displays.map((d: { inline: boolean }) => d.inline)).toEqual([false, true]);
  expect(big.content.filter((block) => block.type === "image").length).toBe(1);
  expect(big.structuredContent.displays[0].artifact.size).toBe(450 * 1024);

  // Two images of 300 KiB (400 KiB in base64) each: the second would pass 768 KiB in all.
  const pair = await cell(
    "import os\ndisplay(Pic(payload=os.urandom(300 * 1024)), Pic(payload=os.urandom(300 * 1024)))",
  );
  expect(pair.structuredContent.displays.map((d: { inline: boolean }) => d.inline)).toEqual([true, false]);
  expect(pair.content[0]?.text).toContain("1 display not shown inline");
});

test("saved files can display too, in persistent and fresh mode", async () => {
  await h.run(`open('show.py', 'w').write(${JSON.stringify(`${PIC}\ndisplay(Pic(5, 2))\n`)})`);
  for (const mode of ["persistent", "fresh"]) {
    const result = await h.call("python_execute_file", {
      session_id: h.id,
      path: "show.py",
      mode,
    });
    const images = (result.content as Block[]).filter((block) => block.type === "image");
    expect(images.length).toBe(1);
    expect(pngWidth(images[0]?.data as string)).toBe(5);
  }
});
