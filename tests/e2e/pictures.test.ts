// Real matplotlib and Pillow, through the system interpreter that has them (CI installs Debian's
// python3-matplotlib and python3-pil). Without them these tests skip and say why. The archiving tests at the
// end are about the server's policy, not about plotting: their pictures are made with the standard library.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Harness } from "../support/harness.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";

function missing(): string | undefined {
  try {
    // Looked up, not imported: importing matplotlib here would cost as much CPU as a test.
    const probe = Bun.spawnSync(
      [
        SYSTEM_PYTHON,
        "-c",
        "import importlib.util as u, sys; sys.exit(not (u.find_spec('matplotlib') and u.find_spec('PIL')))",
      ],
      { stderr: "pipe" },
    );
    if (probe.exitCode === 0) return undefined;
    return `${SYSTEM_PYTHON} cannot import matplotlib and PIL (install python3-matplotlib and python3-pil)`;
  } catch {
    return `${SYSTEM_PYTHON} does not exist`;
  }
}

const reason = missing();
if (reason) console.warn(`skipping matplotlib/Pillow tests: ${reason}`);
const real = test.skipIf(reason !== undefined);

let h: Harness;

type Block = { type: string; text?: string; data?: string; mimeType?: string };

async function cell(code: string) {
  const result = await h.call("execute_python", { code });
  return { ...result, content: result.content as Block[] };
}

function images(content: Block[]): Block[] {
  return content.filter((block) => block.type === "image");
}

/** Width and height from a PNG's IHDR chunk. */
function pngSize(base64: string): [number, number] {
  const png = Buffer.from(base64, "base64");
  return [png.readUInt32BE(16), png.readUInt32BE(20)];
}

// One server and one worker for the tests that only look at what a cell shows: none of them depends on a
// fresh session (each closes the figures it makes), and a fresh worker costs a matplotlib import in CPU.
describe("matplotlib and Pillow in one session", () => {
  beforeAll(async () => {
    if (!reason) h = await Harness.start({ args: ["--python", SYSTEM_PYTHON] });
  });
  afterAll(async () => {
    if (!reason) await h.close();
  });

  real("the worker runs matplotlib headless (Agg) and plt.show() returns the figure as a PNG", async () => {
    const result = await cell(
      "import matplotlib, matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()\nprint(matplotlib.get_backend())",
    );
    expect(result.isError).toBe(false);
    expect(result.structuredContent.stdout).toBe("agg\n");
    const shown = images(result.content);
    expect(shown.length).toBe(1);
    expect(shown[0]?.mimeType).toBe("image/png");
    expect(pngSize(shown[0]?.data as string)).toEqual([640, 480]);
    // Shown figures are closed: nothing leaks into the next cell.
    expect((await h.run("import matplotlib.pyplot as plt\nplt.get_fignums()")).value).toEqual([]);
  });

  real("figures still open at the end of a cell are rendered once and closed", async () => {
    const result = await cell(
      "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])\nplt.figure()\nplt.plot([2, 1])\nNone",
    );
    expect(images(result.content).length).toBe(2);
    expect(result.structuredContent.displays.length).toBe(2);
    const next = await cell("plt.get_fignums()");
    expect(next.structuredContent.value).toEqual([]);
    expect(images(next.content).length).toBe(0);
  });

  real("a figure object as the trailing value is not rendered implicitly", async () => {
    const result = await cell(
      "from matplotlib.figure import Figure\nfig = Figure()\nfig.add_subplot().plot([1, 2])\nfig",
    );
    expect(images(result.content).length).toBe(0);
    expect(result.structuredContent.displays).toBeUndefined();
    expect(result.structuredContent.return_value).toContain("safe preview omitted");
    // Asked for explicitly, the same figure is shown.
    const shown = await cell("display(fig)");
    expect(images(shown.content).length).toBe(1);
  });

  real("Pillow images work through display()", async () => {
    const result = await cell("from PIL import Image\ndisplay(Image.new('RGB', (30, 20), 'red'))");
    const shown = images(result.content);
    expect(shown.length).toBe(1);
    expect(shown[0]?.mimeType).toBe("image/png");
    expect(pngSize(shown[0]?.data as string)).toEqual([30, 20]);
  });

  real("more than 8 figures: 8 inline, the rest set aside", async () => {
    const result = await cell(
      "import matplotlib.pyplot as plt\nfor i in range(10):\n    plt.figure(figsize=(2, 2))\n    plt.plot([i, 0])\n",
    );
    expect(images(result.content).length).toBe(8);
    const displays = result.structuredContent.displays as Array<{ inline: boolean; mime: string }>;
    expect(displays.length).toBe(10);
    expect(displays.filter((display) => !display.inline).length).toBe(2);
    expect(result.content[0]?.text).toContain("2 displays not shown inline");
    expect(result.content.filter((block) => block.type === "resource_link").length).toBe(2);
  });

  real("a huge figure is rendered at a bounded resolution; a huge noisy one is set aside", async () => {
    const simple = await cell(
      "import matplotlib.pyplot as plt\nplt.figure(figsize=(200, 100))\nplt.plot([1, 2])\nNone",
    );
    const [width, height] = pngSize(images(simple.content)[0]?.data as string);
    expect(width).toBeLessThanOrEqual(2_000);
    expect(height).toBeLessThanOrEqual(1_000);
    const noisy = await cell(
      "import random\nplt.figure(figsize=(20, 20))\nplt.imshow([[random.random() for _ in range(400)] for _ in range(400)])\nNone",
    );
    expect(noisy.isError).toBe(false);
    expect(images(noisy.content).length).toBe(0);
    const [display] = noisy.structuredContent.displays;
    expect(display.inline).toBe(false);
    expect(display.bytes).toBeGreaterThan(512 * 1024 * 0.75);
    // Kept as a PNG artifact: saved to a file, it is the whole picture at the bounded resolution.
    expect(display.artifact.size).toBe(display.bytes);
    const path = join(h.project, "noisy.png");
    const saved = await h.call("artifact_save", {
      session_id: noisy.structuredContent.session_id,
      id: display.artifact.id,
      path,
    });
    expect(saved.isError).toBe(false);
    const png = readFileSync(path);
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([2_000, 2_000]);
  });
});

real("a backend the user chose is left alone", async () => {
  h = await Harness.start({ args: ["--python", SYSTEM_PYTHON], env: { MPLBACKEND: "pdf" } });
  try {
    const result = await cell(
      "import matplotlib, matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\nmatplotlib.get_backend()",
    );
    expect(result.structuredContent.value).toBe("pdf");
    expect(images(result.content).length).toBe(0);
  } finally {
    await h.close();
  }
});

/**
 * A cell that displays a picture of noise as big as a 4 × 4 inch matplotlib plot of 300 × 300 random values
 * (about 300 KB of PNG, inline on its own), distinct for each seed. The archiving tests are about which of a
 * session's pictures the server keeps inline and which it archives, not about plotting: a PNG written with
 * zlib costs the worker next to nothing, where rendering 89 plots cost the suite some 15 s of CPU.
 */
function noisyPicture(seed: number): string {
  return `import random, struct, zlib

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

class Noise:
    def _repr_png_(self):
        width, height = 320, 318
        noise = random.Random(${seed}).randbytes(3 * width * height)
        rows = b"".join(b"\\0" + noise[3 * width * y : 3 * width * (y + 1)] for y in range(height))
        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 0)) + chunk(b"IEND", b"")
        return b"\\x89PNG\\r\\n\\x1a\\n" + body

display(Noise())`;
}

// Each test is about one session's history from its first run, so each has a fresh server. Their
// pictures need only the standard library, so they run without matplotlib too.
describe("archiving a session's pictures", () => {
  beforeEach(async () => {
    h = await Harness.start();
  });
  afterEach(async () => {
    await h.close();
  });

  test("only the newest runs keep their pictures inline; older runs' pictures become artifacts python_run finds", async () => {
    const budget = 4 * 786_432;
    const runs: Array<{ id: string; data: string }> = [];
    for (let i = 0; i < 9; i++) {
      const result = await cell(noisyPicture(i));
      const [image] = images(result.content);
      expect(image?.data?.length).toBeGreaterThan(300_000);
      runs.push({ id: result.structuredContent.run_id, data: image?.data as string });
    }
    // Walking from the newest run, pictures stay inline while they fit the session's budget.
    let kept = 0;
    const inline = new Set<string>();
    for (const run of [...runs].reverse()) {
      if (kept + run.data.length > budget) break;
      kept += run.data.length;
      inline.add(run.id);
    }
    expect(inline.size).toBeGreaterThanOrEqual(4);
    expect(inline.size).toBeLessThan(runs.length);

    for (const run of runs) {
      const again = await h.call("python_run", { run_id: run.id });
      const content = again.content as Block[];
      const [display] = again.structuredContent.displays;
      if (inline.has(run.id)) {
        expect(images(content).map((block) => block.data)).toEqual([run.data]);
        expect(display).toMatchObject({ inline: true });
        expect(display.archived).toBeUndefined();
        continue;
      }
      expect(images(content)).toEqual([]);
      expect(display).toMatchObject({ mime: "image/png", inline: false, archived: true });
      expect(content[0]?.text).toContain("1 picture no longer shown inline");
      expect(content[0]?.text).toContain(display.artifact.id);
      expect(content.filter((block) => block.type === "resource_link").length).toBe(1);
      // The artifact is the very picture the run showed.
      const path = join(h.project, `${run.id}.png`);
      const saved = await h.call("artifact_save", {
        session_id: again.structuredContent.session_id,
        id: display.artifact.id,
        path,
      });
      expect(saved.isError).toBe(false);
      expect(readFileSync(path).equals(Buffer.from(run.data, "base64"))).toBe(true);
    }
  });

  test("a long plotting loop keeps only the latest 16 archived pictures, and pushes no other artifact out", async () => {
    const mine = await h.run("artifact(b'mine' * 1000)['id']");
    // More archived pictures than the store has room for (64 artifacts in all); the history keeps 64 runs.
    const runs: string[] = [];
    for (let i = 0; i < 80; i++) runs.push((await cell(noisyPicture(i))).structuredContent.run_id);
    let stored = 0;
    let described = 0;
    for (const runId of runs.slice(-64)) {
      const [display] = (await h.call("python_run", { run_id: runId })).structuredContent.displays;
      if (!display.archived) continue;
      if (display.artifact) stored++;
      else described++;
    }
    expect(stored).toBe(16);
    expect(described).toBeGreaterThan(30);
    // The cell's own artifact is still there.
    const read = await h.call("artifact_read", {
      session_id: (await h.health()).server.session_id,
      id: mine.value,
      length: 8,
    });
    expect(read.isError).toBe(false);
    expect(read.structuredContent.content).toBe("minemine");
  }, 120_000);
});
