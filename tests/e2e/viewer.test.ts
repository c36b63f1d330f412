// The viewer in a real browser (headless Chromium) while an agent drives the server over stdio: output
// shows up while its cell still runs, a plot is a picture and a DataFrame a table, markup a cell prints
// stays text, and Cancel on the page ends the agent's call as python_cancel would. One test keeps a
// screenshot (docs/viewer.png when UPDATE_SCREENSHOT=1, else in its temp directory).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { Harness, waitFor } from "../support/harness.ts";
import { Browser, browserMissing, viewerOf } from "../support/viewer.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";
const SCREENSHOT = join(import.meta.dir, "../../docs/viewer.png");

function pythonMissing(): string | undefined {
  // Looked up, not imported: importing pandas and matplotlib here would cost more CPU than a test.
  const probe = existsSync(SYSTEM_PYTHON)
    ? Bun.spawnSync(
        [
          SYSTEM_PYTHON,
          "-c",
          "import importlib.util as u, sys; sys.exit(not (u.find_spec('matplotlib') and u.find_spec('pandas')))",
        ],
        { stderr: "pipe" },
      )
    : undefined;
  return probe?.exitCode === 0
    ? undefined
    : `${SYSTEM_PYTHON} cannot import matplotlib and pandas (install python3-matplotlib and python3-pandas)`;
}

const noBrowser = browserMissing();
if (noBrowser) console.warn(`skipping the viewer's browser tests: ${noBrowser}`);
const noLibraries = pythonMissing();
if (noLibraries) console.warn(`skipping the viewer's plot and table test: ${noLibraries}`);

let browser: Browser;
let harnesses: Harness[] = [];
let pages: Page[] = [];
beforeAll(async () => {
  if (!noBrowser) browser = await Browser.launch();
});
afterAll(async () => {
  if (shared) await (await shared).h.close();
  await browser?.close();
});
afterEach(async () => {
  await Promise.all(pages.map((page) => page.close().catch(() => undefined)));
  pages = [];
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

/** A server with its viewer, and a browser tab on it (opened from the printed URL, as a person would). */
async function watched(args: string[] = []) {
  const h = await Harness.start({ args: ["--viewer", "--python", SYSTEM_PYTHON, ...args] });
  harnesses.push(h);
  const viewer = await viewerOf(h);
  const page = await browser.context.newPage();
  pages.push(page);
  await page.goto(viewer.url);
  await page.locator("#connection.live").waitFor();
  return { h, viewer, page };
}

// The tests that look only at their own runs' cards share one server and page: a server, a worker and a
// page cost more CPU to start than such a test. The plot test keeps its own, since its screenshot is the
// documentation's picture of the page and must show only its runs.
let shared: Promise<{ h: Harness; page: Page }> | undefined;
function sharedWatched() {
  shared ??= (async () => {
    const h = await Harness.start({ args: ["--viewer", "--python", SYSTEM_PYTHON] });
    const viewer = await viewerOf(h);
    const page = await browser.context.newPage();
    await page.goto(viewer.url);
    await page.locator("#connection.live").waitFor();
    return { h, page };
  })();
  return shared;
}

const runCard = (page: Page, runId: string) => page.locator(`[id="run-${runId}"]`);

describe.skipIf(noBrowser !== undefined)("the viewer in Chromium", () => {
  test("a cell's stdout appears while the cell is still running", async () => {
    const { h, page } = await sharedWatched();
    // The URL the page shows no longer carries the token: it went into the cookie.
    expect(new URL(page.url()).search).toBe("");
    const flag = join(h.dir, "go");
    let settled = false;
    const call = h
      .run(
        `import os, time\nprint('first line from the cell', flush=True)\nwhile not os.path.exists(${JSON.stringify(flag)}):\n    time.sleep(0.02)\nprint('last line')\n'over'`,
      )
      .finally(() => {
        settled = true;
      });
    await page.locator("pre.stdout", { hasText: "first line from the cell" }).waitFor();
    expect(settled).toBe(false);
    await expect(page.locator(".run.running .status").first().textContent()).resolves.toBe("running");
    writeFileSync(flag, "");
    const result = await call;
    expect(result.success).toBe(true);
    const card = runCard(page, result.run_id);
    await card.locator(".status", { hasText: "finished" }).waitFor();
    expect(await card.locator("pre.stdout").textContent()).toBe("first line from the cell\nlast line\n");
    expect(await card.locator("pre.value").textContent()).toBe('"over"');
  });

  test("Cancel ends a running cell: the agent's execute_python returns cancelled and the variables stay", async () => {
    const { h, page } = await sharedWatched();
    await h.run("kept = 41");
    const call = h.run("import time\nprint('waiting', flush=True)\ntime.sleep(600)");
    const button = page.locator("button.cancel");
    await button.waitFor();
    await page.locator("pre.stdout", { hasText: "waiting" }).waitFor();
    await button.click();
    const result = await call;
    expect(result.success).toBe(false);
    expect(result.error_code).toBe("CANCELLED");
    expect(result.state).toBe("preserved");
    await runCard(page, result.run_id).locator(".status", { hasText: "cancelled" }).waitFor();
    expect((await h.run("kept + 1")).return_value).toBe("42");
    expect(await page.locator("button.cancel").count()).toBe(0);
  });

  test("markup a cell prints is shown as text and runs nothing", async () => {
    const { h, page } = await sharedWatched();
    const markup = "<img src=x onerror=window.__ran=1><script>window.__ran=2</script><b>bold</b>";
    const result = await h.run(`print('${markup}')\n'${markup}'`);
    const card = runCard(page, result.run_id);
    await card.locator(".status", { hasText: "finished" }).waitFor();
    expect(await card.locator("pre.stdout").textContent()).toBe(`${markup}\n`);
    expect(await card.locator("pre.source").textContent()).toContain(markup);
    expect(await page.evaluate(() => (globalThis as any).__ran)).toBeUndefined();
    expect(await page.locator("img[src=x], script:not([src]), b").count()).toBe(0);
  });

  test.skipIf(noLibraries !== undefined)(
    "a matplotlib plot renders as a picture and a DataFrame as a table with its column names",
    async () => {
      const { h, page } = await watched();
      const series = await h.run("import pandas as pd\npd.Series([3, 1, 2], name='counts')");
      const column = runCard(page, series.run_id).locator("table.frame");
      await column.waitFor();
      expect(await column.locator("thead th").allTextContents()).toEqual(["", "counts"]);

      await h.run("print('epoch 3: loss 0.21')\nimport sys\nprint('a warning', file=sys.stderr)");
      const frame = await h.run(
        "import pandas as pd\npd.DataFrame({'city': ['Lyon', 'Oslo', 'Quito'], 'temperature': [14.5, 6.1, 13.9], 'rain mm': [820, 760, 1000]})",
      );
      const table = runCard(page, frame.run_id).locator("table.frame");
      await table.waitFor();
      expect(await table.locator("thead th").allTextContents()).toEqual([
        "",
        "city",
        "temperature",
        "rain mm",
      ]);
      expect(await table.locator("tbody tr").count()).toBe(3);
      expect(await table.locator("tbody tr").first().locator("td").allTextContents()).toEqual([
        "Lyon",
        "14.5",
        "820",
      ]);

      const plot = await h.run(
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n" +
          "fig, ax = plt.subplots(figsize=(5, 3), dpi=80)\nax.plot([0, 1, 2, 3], [1, 3, 2, 4], marker='o')\n" +
          "ax.set_title('loss per epoch')\nplt.show()",
      );
      expect(plot.success).toBe(true);
      const picture = runCard(page, plot.run_id).locator("img.picture");
      await picture.waitFor();
      await waitFor(async () => (await picture.evaluate((img: any) => img.complete)) === true, {
        what: "the picture to load",
      });
      expect(await picture.evaluate((img: any) => img.naturalWidth)).toBeGreaterThan(0);
      expect(await picture.getAttribute("src")).toMatch(/^\/display\//);

      const shot = await page.screenshot({ fullPage: false });
      expect(shot.subarray(1, 4).toString()).toBe("PNG");
      writeFileSync(process.env.UPDATE_SCREENSHOT === "1" ? SCREENSHOT : join(h.dir, "viewer.png"), shot);
    },
  );
});
