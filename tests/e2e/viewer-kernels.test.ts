// The viewer shows a session on a Jupyter kernel like a local one (where it runs, its runs' live output),
// and its Cancel interrupts the kernel: the agent's call ends cancelled and the kernel's variables stay.
// Headless Chromium on the page; a real Jupyter Server on loopback.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { Harness } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { Browser, browserMissing, viewerOf } from "../support/viewer.ts";

const missing = browserMissing() ?? jupyterMissing();
if (missing) console.warn(`skipping the viewer's kernel session test: ${missing}`);

describe.skipIf(missing !== undefined)("the viewer and a kernel session", () => {
  let jupyter: JupyterServer;
  let browser: Browser;
  let h: Harness;
  let page: Page;
  beforeAll(async () => {
    [jupyter, browser] = await Promise.all([JupyterServer.start(), Browser.launch()]);
    let file = "";
    h = await Harness.start({
      beforeStart: (project) => {
        file = join(project, "kernels.json");
        writeFileSync(
          file,
          JSON.stringify({ kernelServers: { lab: { url: jupyter.url, token: "${LAB_TOKEN}" } } }),
        );
      },
      get args() {
        return ["--viewer", "--kernels", file];
      },
      env: { LAB_TOKEN: jupyter.token },
    });
    const viewer = await viewerOf(h);
    page = await browser.context.newPage();
    await page.goto(viewer.url);
    await page.locator("#connection.live").waitFor();
  }, 90_000);
  afterAll(async () => {
    await page?.close().catch(() => undefined);
    await h?.close();
    await browser?.close();
    if (jupyter) expect(await jupyter.stopListing()).toEqual([]);
  }, 60_000);

  test("where it runs, live output, and Cancel interrupts the kernel", async () => {
    const opened = (await h.call("python_session_open", { name: "gpu", kernel_server: "lab" }))
      .structuredContent;
    const session = opened.session_id;
    const kernelId = opened.environment.kernel.kernel_id;
    const run = async (code: string) =>
      (await h.call("execute_python", { session_id: session, code })).structuredContent;
    await run("kept = 41");
    await page.locator(".meta", { hasText: `kernel ${kernelId} on "lab"` }).waitFor();
    expect(await page.locator(".meta", { hasText: "kernel" }).textContent()).not.toContain(jupyter.token);
    const call = run("import time\nprint('waiting on the kernel', flush=True)\ntime.sleep(600)");
    await page.locator("pre.stdout", { hasText: "waiting on the kernel" }).waitFor();
    await page.locator("button.cancel").click();
    const result = await call;
    expect(result).toMatchObject({ success: false, error_code: "CANCELLED", state: "preserved" });
    expect(await run("kept + 1")).toMatchObject({ value: 42 });
  }, 60_000);
});
