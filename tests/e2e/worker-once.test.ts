// Work the worker must do once per cell, not twice: a failure's message, a run's place in the notebook
// count, an image's base64, the preview's type tables. Each test reaches the worker's own functions
// through a helper's globals (display.__globals__), counts the calls a cell triggers, and fails if the
// work is repeated.
import { afterEach, beforeEach, expect, test } from "bun:test";
import { Harness } from "../support/harness.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";
const numpyMissing = (() => {
  try {
    const probe = Bun.spawnSync([SYSTEM_PYTHON, "-c", "import numpy"], { stderr: "pipe" });
    return probe.exitCode === 0 ? undefined : `${SYSTEM_PYTHON} cannot import numpy (install python3-numpy)`;
  } catch {
    return `${SYSTEM_PYTHON} does not exist`;
  }
})();
if (numpyMissing) console.warn(`skipping the preview-table test: ${numpyMissing}`);

let h: Harness;
beforeEach(async () => {
  h = await Harness.start();
});
afterEach(async () => {
  await h.close();
});

test("a failed cell's exception is turned into text once", async () => {
  const failed = await h.run(
    [
      "calls = []",
      "class Loud(Exception):",
      "    def __str__(self):",
      "        calls.append(1)",
      "        return 'loud %d' % len(calls)",
      "raise Loud()",
    ].join("\n"),
  );
  expect(failed.success).toBe(false);
  expect(String(failed.error)).toEndWith("Loud: loud 1");
  expect((await h.run("len(calls)")).value).toBe(1);
  // The notebook keeps the same text the result showed.
  const exported = await h.run("export_notebook('once.py')['missing']");
  expect(exported.value).toBe(0);
  expect(await Bun.file(`${h.project}/once.py`).text()).toContain("# Failed: Loud: loud 1");
});

test("a run whose result failed to go out after it was recorded still counts once", async () => {
  // The result of this very cell fails to send once (as when an interrupt races the end of a cell):
  // the worker reports an internal error for it instead, recording the run a second time.
  const patched = await h.run(
    [
      "_session = display.__globals__['_Session']",
      "_send = _session._send_result",
      "def _once(self, run_id, result):",
      "    _session._send_result = _send",
      "    raise RuntimeError('result lost')",
      "_session._send_result = _once",
    ].join("\n"),
  );
  expect(patched.success).toBe(false);
  expect(patched.error_code).toBe("INTERNAL");
  const exported = await h.run("export_notebook('after-crash.ipynb')");
  expect(exported.value).toMatchObject({ cells: 1, missing: 0 });
  const notebook = JSON.parse(await Bun.file(`${h.project}/after-crash.ipynb`).text());
  expect(notebook.cells.map((cell: { id: string }) => cell.id)).toEqual([patched.run_id]);
  expect(notebook.cells[0].execution_count).toBe(1);
});

test("an image shown with display() is base64-encoded once", async () => {
  const shown = await h.run(
    [
      "import binascii",
      "_encode, encoded = binascii.b2a_base64, []",
      "def _counting(data, **options):",
      "    encoded.append(len(data))",
      "    return _encode(data, **options)",
      "class Picture:",
      "    def _repr_png_(self):",
      "        return b'\\x89PNG\\r\\n\\x1a\\n' + bytes(4000)",
      "binascii.b2a_base64 = _counting",
      "try:",
      "    display(Picture())",
      "finally:",
      "    binascii.b2a_base64 = _encode",
      "encoded",
    ].join("\n"),
  );
  expect(shown.success).toBe(true);
  expect(shown.value).toEqual([4008]);
  const exported = await h.run("export_notebook('picture.ipynb')['missing']");
  expect(exported.value).toBe(0);
  const notebook = JSON.parse(await Bun.file(`${h.project}/picture.ipynb`).text());
  const png = Buffer.from(notebook.cells[0].outputs[0].data["image/png"], "base64");
  expect(png.length).toBe(4008);
});

test.skipIf(numpyMissing !== undefined)(
  "the preview's type tables are built once, not on every preview",
  async () => {
    await h.close();
    h = await Harness.start({ args: ["--python", SYSTEM_PYTHON] });
    await h.run(
      [
        "import numpy as np",
        "_g = display.__globals__",
        "_build, built = _g['_by_id'], []",
        "def _counting(classes):",
        "    built.append(1)",
        "    return _build(classes)",
        "_g['_by_id'] = _counting",
      ].join("\n"),
    );
    const first = await h.run("np.arange(3)");
    expect(first.return_value).toBe("numpy.ndarray shape=(3,) dtype=int64\n[0, 1, 2]");
    const afterFirst = (await h.run("len(built)")).value as number;
    for (let i = 0; i < 3; i++) {
      expect((await h.run("np.arange(3) * 2")).return_value).toBe(
        "numpy.ndarray shape=(3,) dtype=int64\n[0, 2, 4]",
      );
    }
    expect((await h.run("len(built)")).value).toBe(afterFirst);
  },
);
