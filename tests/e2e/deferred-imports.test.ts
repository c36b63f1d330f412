// The worker starts without asyncio, subprocess or linecache and adapts each at its first import
// (worker.py, "Deferred imports"). Whatever the order of first use, cells see one persistent loop,
// tracked children and their own source lines, as if everything had been there from the start.
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sessionPerTest } from "../support/harness.ts";

// One server for the file; each test runs in a session (a worker and a project) of its own.
const h = sessionPerTest();

const DEFERRED =
  "sorted(m for m in ('asyncio', 'concurrent.futures', 'subprocess', 'linecache') if m in sys.modules)";

describe("deferred imports", () => {
  test("a plain first cell starts none of them", async () => {
    const first = await h.run(`import sys\n${DEFERRED}`);
    expect(first.error).toBeNull();
    expect(first.value).toEqual([]);
  });

  test("the import watch stands first in sys.meta_path only until every module it waits for was imported", async () => {
    const watching = "[type(finder).__name__ for finder in sys.meta_path].count('_FirstImports')";
    expect((await h.run(`import sys\n${watching}`)).value).toBe(1);
    expect((await h.run(`import linecache\n${watching}`)).value).toBe(1);
    // asyncio brings subprocess with it, and subprocess still gets the tracked Popen on the way.
    const last = await h.run(
      `import asyncio, subprocess\n[${watching}, '_track_popen' in subprocess.Popen.__init__.__qualname__]`,
    );
    expect(last.value).toEqual([1, true]);
    // getpass gets the version that asks the person (docs/tools.md, input() and getpass()).
    const getpass = await h.run(`import getpass\n[${watching}, getpass.getpass.__qualname__]`);
    expect(getpass.value).toEqual([1, "_patch_getpass.<locals>.getpass"]);
    // The last one is matplotlib.pyplot (display() patches plt.show); a stand-in package is enough here.
    mkdirSync(join(h.project, "matplotlib"));
    writeFileSync(join(h.project, "matplotlib", "__init__.py"), "");
    writeFileSync(join(h.project, "matplotlib", "pyplot.py"), "def show():\n    return 'original'\n");
    const pyplot = await h.run(
      `import sys\nsys.path.insert(0, '.')\nimport matplotlib.pyplot\n[${watching}, hasattr(matplotlib.pyplot.show, '__wrapped__')]`,
    );
    expect(pyplot.value).toEqual([0, true]);
  });

  test("importing asyncio in a plain cell gives the loop every later cell runs on", async () => {
    const made = await h.run("import asyncio\nloop = asyncio.get_event_loop()\nloop.is_closed()");
    expect(made.error).toBeNull();
    expect(made.value).toBe(false);
    const awaited = await h.run("await asyncio.sleep(0)\nasyncio.get_running_loop() is loop");
    expect(awaited.value).toBe(true);
    const plain = await h.run("asyncio.get_event_loop() is loop");
    expect(plain.value).toBe(true);
  });

  test("a first cell that awaits imports asyncio itself and keeps the loop it ran on", async () => {
    const first = await h.run("import asyncio\nawait asyncio.sleep(0)\nloop = asyncio.get_running_loop()\n1");
    expect(first.error).toBeNull();
    expect(first.value).toBe(1);
    const next = await h.run("asyncio.get_event_loop() is loop");
    expect(next.value).toBe(true);
  });

  test("asyncio imported by a library (not by name in the cell) still gets the persistent loop", async () => {
    const first = await h.run(
      "import sys, importlib\nimportlib.import_module('asyncio.queues')\naio = sys.modules['asyncio']\nloop = aio.get_event_loop()\n1",
    );
    expect(first.error).toBeNull();
    const second = await h.run("async def f():\n    return aio.get_running_loop()\n(await f()) is loop");
    expect(second.value).toBe(true);
  });

  test("a task a plain cell creates on the first loop is cancelled when the cell ends", async () => {
    const result = await h.run(
      "import asyncio\nasync def forever():\n    await asyncio.sleep(60)\nt = asyncio.get_event_loop().create_task(forever())\n'made'",
    );
    expect(result.success).toBe(true);
    expect(result.background_tasks_cancelled).toBe(1);
    expect((await h.run("t.cancelled()")).value).toBe(true);
  });

  test("after asyncio.run() in a cell, the persistent loop is current again", async () => {
    await h.run("import asyncio\nloop = asyncio.get_event_loop()");
    const ran = await h.run("async def one():\n    return 1\nasyncio.run(one())");
    expect(ran.value).toBe(1);
    expect((await h.run("asyncio.get_event_loop() is loop")).value).toBe(true);
  });

  test("subprocess imported late: its Popen is the tracked one, and os.popen works", async () => {
    const result = await h.run(
      "import subprocess, os\np = subprocess.Popen(['/bin/true'])\np.wait()\n" +
        "[type(p).__name__, type(p).__module__, type(p) is subprocess.Popen, os.popen('echo hi').read().strip()]",
    );
    expect(result.error).toBeNull();
    expect(result.value).toEqual(["Popen", "subprocess", true, "hi"]);
  });

  test("linecache imported after cells ran still knows their lines (inspect.getsource)", async () => {
    await h.run("def twice(x):\n    return 2 * x");
    const source = await h.run("import inspect\ninspect.getsource(twice)");
    expect(source.error).toBeNull();
    expect(source.value).toBe("def twice(x):\n    return 2 * x");
  });

  test("a traceback of a later cell shows the line of a function from an earlier one", async () => {
    await h.run("def broken():\n    return 1 / 0");
    const failed = await h.run("broken()");
    expect(failed.success).toBe(false);
    expect(failed.error).toContain("return 1 / 0");
  });
});
