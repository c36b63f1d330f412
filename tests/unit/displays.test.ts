// The server's side of displays: chunk assembly and the inline limits (8 displays, 512 KiB per image,
// 768 KiB of images per result, all counted in base64), and what is kept for artifacts.
import { expect, test } from "bun:test";
import { Displays } from "../../src/worker/displays.ts";

const KIB = 1024;

function image(displays: Displays, base64Chars: number, chunk = 524_288) {
  const data = "A".repeat(base64Chars);
  for (let start = 0; start < Math.max(data.length, 1); start += chunk) {
    const end = start + chunk;
    displays.add({
      type: "display",
      id: "run",
      mime: "image/png",
      bytes: (base64Chars * 3) / 4,
      data: data.slice(start, end),
      more: end < data.length,
    });
  }
}

test("chunks of one image are joined; text displays come whole; order is kept", () => {
  const displays = new Displays();
  image(displays, 100, 30);
  displays.add({ type: "display", id: "run", mime: "text/markdown", text: "**hi**" });
  const listed = displays.list();
  expect(listed?.map((display) => display.mime)).toEqual(["image/png", "text/markdown"]);
  expect(listed?.[0]?.data).toBe("A".repeat(100));
  expect(listed?.[1]).toEqual({ mime: "text/markdown", bytes: 6, text: "**hi**", inline: true });
  expect(new Displays().list()).toBeUndefined();
});

test("at most 8 inline; per-image and per-result byte limits", () => {
  const many = new Displays();
  for (let i = 0; i < 10; i++) image(many, 8);
  expect(many.list()?.map((display) => display.inline)).toEqual([...Array(8).fill(true), false, false]);

  const sizes = new Displays();
  image(sizes, 512 * KIB + 4); // over 512 KiB on its own
  image(sizes, 400 * KIB);
  image(sizes, 400 * KIB); // 800 KiB with the previous one: over 768 KiB
  image(sizes, 300 * KIB); // 700 KiB with the second: fits
  expect(sizes.list()?.map((display) => display.inline)).toEqual([false, true, false, true]);
});

test("set-aside displays keep their content for at most 8 artifacts; keepAside stores them", async () => {
  const displays = new Displays();
  for (let i = 0; i < 20; i++) image(displays, 8);
  const listed = displays.list() ?? [];
  expect(listed.filter((display) => !display.inline && display.data !== undefined).length).toBe(8);
  const stored: Array<[number, string]> = [];
  const kept = await Displays.keepAside(listed, async (bytes, format) => {
    stored.push([bytes.length, format]);
    return {
      id: crypto.randomUUID(),
      size: bytes.length,
      format,
      sha256: "0".repeat(64),
      lifetime: "server",
      eviction: "oldest-first",
    };
  });
  expect(stored.length).toBe(8);
  expect(stored[0]).toEqual([6, "binary"]);
  expect(kept.filter((display) => display.artifact).length).toBe(8);
  // Only inline images still carry data.
  expect(kept.filter((display) => display.data !== undefined).length).toBe(8);
  expect(kept.every((display) => display.data === undefined || display.inline)).toBe(true);
  // A store that fails leaves the display listed, without an artifact.
  const failed = await Displays.keepAside(listed, async () => {
    throw new Error("store full");
  });
  expect(failed.filter((display) => display.artifact).length).toBe(0);
  expect(failed.length).toBe(20);
});
