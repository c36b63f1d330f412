// worker.py's engine inside a real Jupyter kernel (Debian's ipykernel behind a Jupyter Server on
// loopback), driven as the server's kernel sessions will drive it: the file loaded as a module, each cell an
// execute_request of kernel_run(...), frames read from the comm messages on iopub, frames for the engine
// (bridge answers) given on the kernel's stdin channel. The results are the worker's own: the safe
// preview, streamed output, errors, top-level await, pictures, an mcp call answered by the driver, and an
// interrupt. The kernel stays a normal kernel: after our cells, a plain request sees the same variables
// and its prints go to the kernel's own stream.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { JupyterLink, type KernelLink } from "../../src/kernels/jupyter.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";

const WORKER = readFileSync(resolve(import.meta.dir, "../../worker.py"), "utf8");
const POLL_PROMPT = "\u0000repl-mcp frames";

const noJupyter = jupyterMissing();
if (noJupyter) console.warn(`skipping the kernel host tests: ${noJupyter}`);

type Frame = Record<string, any>;

/** What the server's kernel worker will do for one cell, in a few lines. */
async function runCell(
  kernel: KernelLink,
  code: string,
  answer: (frame: Frame) => Frame | undefined = () => undefined,
) {
  const frames: Frame[] = [];
  let result: Frame | undefined;
  const queue: Frame[] = [];
  let wake: (() => void) | undefined;
  const runId = crypto.randomUUID();
  const reply = await kernel.execute(
    `__import__('repl_mcp_engine').kernel_run(${JSON.stringify(JSON.stringify({ type: "execute", id: runId, code, timeout: 30 }))})`,
    {
      allowStdin: true,
      onIopub: (message) => {
        if (message.msgType !== "comm_msg") return;
        const frame = JSON.parse(String((message.content.data as { frame: string }).frame));
        frames.push(frame);
        if (frame.type === "result") result = frame.result;
        const response = answer(frame);
        if (response) queue.push(response);
        if (frame.type === "result") queue.push({ type: "end" });
        wake?.();
      },
      onInput: async (prompt) => {
        expect(prompt).toBe(POLL_PROMPT);
        while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        return JSON.stringify(queue.splice(0));
      },
    },
  );
  return { reply, frames, result: result as Frame, runId };
}

describe.skipIf(noJupyter !== undefined)("the worker's engine in a Jupyter kernel", () => {
  let jupyter: JupyterServer;
  let link: JupyterLink;
  let kernel: KernelLink;
  const quiet = console.debug;
  beforeAll(async () => {
    console.debug = () => {};
    jupyter = await JupyterServer.start();
    link = new JupyterLink(jupyter.entry("host"));
    kernel = await link.start();
    const load = [
      "import sys, types",
      "_m = types.ModuleType('repl_mcp_engine')",
      `exec(compile(${JSON.stringify(WORKER)}, '<repl-mcp worker>', 'exec'), _m.__dict__)`,
      "sys.modules['repl_mcp_engine'] = _m",
      "del _m",
    ].join("\n");
    expect((await kernel.execute(load)).status).toBe("ok");
  }, 60_000);
  afterAll(async () => {
    await kernel?.shutdown();
    link?.dispose();
    if (jupyter) {
      // None of our kernels is left on the server.
      const listed = await fetch(`${jupyter.url}api/kernels`, {
        headers: { authorization: `token ${jupyter.token}` },
      });
      expect(await listed.json()).toEqual([]);
    }
    await jupyter?.stop();
    console.debug = quiet;
  });

  test("values, output, errors and top-level await, as from a local worker", async () => {
    const value = await runCell(kernel, "x = 21 * 2\nx");
    expect(value.reply.status).toBe("ok");
    expect(value.result).toMatchObject({ success: true, value: 42, return_value: "42", state: "preserved" });

    const printed = await runCell(
      kernel,
      "import sys\nprint('out')\nprint('err', file=sys.stderr)\n[x, x + 1]",
    );
    expect(
      printed.frames.filter((frame) => frame.type === "output").map((frame) => [frame.stream, frame.text]),
    ).toEqual([
      ["stdout", "out\n"],
      ["stderr", "err\n"],
    ]);
    expect(printed.result).toMatchObject({ stdout: "out\n", stderr: "err\n", value: [42, 43] });

    // The safe preview: no __repr__ of the user's runs.
    const safe = await runCell(
      kernel,
      "class Loud:\n    def __repr__(self):\n        raise SystemExit('ran')\nLoud()",
    );
    expect(safe.result.success).toBe(true);
    expect(safe.result.return_value).toContain("Loud");

    const failed = await runCell(kernel, "1/0");
    expect(failed.result).toMatchObject({ success: false, state: "preserved" });
    expect(failed.result.error).toContain("ZeroDivisionError: division by zero");

    const awaited = await runCell(kernel, "import asyncio\nawait asyncio.sleep(0.01)\n'awaited'");
    expect(awaited.result).toMatchObject({ success: true, value: "awaited" });
  }, 60_000);

  test("a picture comes back as a display frame", async () => {
    const plot = await runCell(
      kernel,
      "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()",
    );
    const display = plot.frames.find((frame) => frame.type === "display");
    expect(display?.mime).toBe("image/png");
    expect(plot.result.success).toBe(true);
  }, 60_000);

  test("an mcp call travels back to the driver and its answer comes in on stdin", async () => {
    const call = await runCell(kernel, "mcp.servers()", (frame) =>
      frame.type === "rpc" && frame.op === "servers"
        ? { type: "rpc_result", id: frame.id, result: ["from-the-server"], error: null }
        : undefined,
    );
    expect(call.result).toMatchObject({ success: true, value: ["from-the-server"] });
  }, 60_000);

  test("an interrupt stops a running cell, and the namespace stays", async () => {
    // Interrupted once its first output shows the cell runs, not after a pause long enough for that.
    let printed = () => {};
    const runs = new Promise<void>((resolve) => (printed = resolve));
    const running = runCell(kernel, "import time\nprint('sleeping', flush=True)\ntime.sleep(30)", (frame) => {
      if (frame.type === "output") printed();
      return undefined;
    });
    await Promise.race([runs, running]);
    await kernel.interrupt();
    const stopped = await running;
    expect(stopped.result).toMatchObject({ success: false, interrupted: true, state: "preserved" });
    expect((await runCell(kernel, "x")).result.value).toBe(42);
  }, 60_000);

  test("the kernel stays a normal kernel: same variables, its own streams", async () => {
    const streams: string[] = [];
    const plain = await kernel.execute("print('plain')", {
      silent: false,
      userExpressions: { x: "x" },
      onIopub: (message) => {
        if (message.msgType === "stream") streams.push(String(message.content.text));
      },
    });
    expect(plain.userExpressions.x?.data?.["text/plain"]).toBe("42");
    expect(streams.join("")).toBe("plain\n");
  }, 60_000);
});
