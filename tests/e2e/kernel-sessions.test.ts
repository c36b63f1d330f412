// Sessions on a Jupyter kernel (docs/kernels.md), end to end: the real binary over stdio, configured
// with --kernels for a real Jupyter Server (Debian's, token auth, on loopback), and the tools of a local
// session used on a kernel session: values, output, safe previews, errors, await, start/poll/cancel,
// timeout, reset, expected_generation, pictures, artifacts, mcp calls served by the local broker,
// input(), the inventory, a file run; and the kernel's own faults. Afterwards the server lists none of
// our kernels.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, waitFor } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";

const noJupyter = jupyterMissing();
if (noJupyter) console.warn(`skipping the kernel session tests: ${noJupyter}`);

const TOKEN_VAR = "KERNEL_TEST_TOKEN";

function kernelsFile(dir: string, jupyter: JupyterServer, extra: Record<string, unknown> = {}): string {
  const file = join(dir, "kernels.json");
  writeFileSync(
    file,
    JSON.stringify({
      kernelServers: {
        lab: { url: jupyter.url, token: `\${${TOKEN_VAR}}`, ...extra },
        shared: { url: jupyter.url, token: `\${${TOKEN_VAR}}`, allowReset: false },
      },
    }),
  );
  return file;
}

async function startServer(jupyter: JupyterServer, args: string[] = []): Promise<Harness> {
  let file = "";
  return await Harness.start({
    beforeStart: (project) => {
      file = kernelsFile(project, jupyter);
    },
    get args() {
      return ["--kernels", file, ...args];
    },
    env: { [TOKEN_VAR]: jupyter.token },
  });
}

describe.skipIf(noJupyter !== undefined)("a session on a Jupyter kernel", () => {
  let jupyter: JupyterServer;
  let h: Harness;
  let session: string;
  const run = async (code: string, args: Record<string, unknown> = {}) =>
    (await h.call("execute_python", { session_id: session, code, ...args })).structuredContent;

  beforeAll(async () => {
    jupyter = await JupyterServer.start();
    h = await startServer(jupyter);
    const opened = await h.call("python_session_open", { name: "gpu", kernel_server: "lab" });
    expect(opened.isError).toBeFalsy();
    session = opened.structuredContent.session_id;
  }, 90_000);
  afterAll(async () => {
    await h?.close();
    if (jupyter) expect(await jupyter.kernels()).toEqual([]);
    await jupyter?.stop();
  }, 60_000);

  test("the session says where it runs, without the token", async () => {
    const listed = (await h.call("python_session_inspect", { session_id: session })).structuredContent;
    expect(listed.environment).toMatchObject({
      source: "kernel_server",
      kernel: { kernel_server: "lab", url: jupyter.url, kernelspec: "python3", owned: true },
    });
    expect(listed.environment.version).toMatch(/^3\./);
    expect(listed.project).toBe(jupyter.root);
    expect(await jupyter.kernels()).toEqual([listed.environment.kernel.kernel_id]);
    expect(JSON.stringify(listed)).not.toContain(jupyter.token);
  });

  test("values persist; output, previews, errors and await are as local", async () => {
    expect(await run("x = 21 * 2\nx")).toMatchObject({ success: true, value: 42, generation: 1 });
    const printed = await run("import sys\nprint('out')\nprint('err', file=sys.stderr)\n[x, x + 1]");
    expect(printed).toMatchObject({ stdout: "out\n", stderr: "err\n", value: [42, 43] });
    const safe = await run("class Loud:\n    def __repr__(self):\n        raise SystemExit('ran')\nLoud()");
    expect(safe.success).toBe(true);
    expect(safe.return_value).toContain("Loud");
    const failed = await run("1/0");
    expect(failed).toMatchObject({ success: false, error_code: "PYTHON_EXCEPTION", state: "preserved" });
    expect(failed.error).toContain("ZeroDivisionError");
    expect(await run("import asyncio\nawait asyncio.sleep(0.01)\nx")).toMatchObject({ value: 42 });
  });

  test("python_start streams into python_run; python_cancel interrupts and keeps the variables", async () => {
    const started = (
      await h.call("python_start", {
        session_id: session,
        code: "import time\nprint('begun', flush=True)\nfor i in range(600):\n    time.sleep(0.05)",
      })
    ).structuredContent;
    const runId = started.run_id;
    await waitFor(
      async () =>
        (
          (await h.call("python_run", { session_id: session, run_id: runId })).structuredContent.stdout ?? ""
        ).includes("begun"),
      { timeoutMs: 20_000, what: "the run's output" },
    );
    const cancelled = (await h.call("python_cancel", { session_id: session, run_id: runId }))
      .structuredContent;
    expect(cancelled).toMatchObject({ cancel_requested: true, run_id: runId });
    let ended: Record<string, any> | undefined;
    await waitFor(
      async () => {
        const polled = (await h.call("python_run", { session_id: session, run_id: runId })).structuredContent;
        ended = polled;
        return polled.status === undefined;
      },
      { timeoutMs: 20_000, what: "the run to end" },
    );
    expect(ended).toMatchObject({ success: false, error_code: "CANCELLED", state: "preserved" });
    expect(await run("x")).toMatchObject({ success: true, value: 42, generation: 1 });
  }, 60_000);

  test("a timeout interrupts the cell; the namespace stays", async () => {
    const timed = await run("import time\ntime.sleep(30)", { timeout: 1 });
    expect(timed).toMatchObject({ success: false, error_code: "TIMEOUT", state: "preserved" });
    expect(await run("x")).toMatchObject({ value: 42 });
  }, 60_000);

  test("pictures come back as images", async () => {
    const result = await h.call("execute_python", {
      session_id: session,
      code: "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
    });
    expect(result.structuredContent.success).toBe(true);
    expect(result.content.some((block) => block.type === "image" && block.mimeType === "image/png")).toBe(
      true,
    );
  }, 60_000);

  test("a value saved as an artifact lands in the server's store and is read with the artifact tools", async () => {
    const made = await run("a = artifact({'rows': list(range(5))})\na['id']");
    expect(made.success).toBe(true);
    const read = await h.call("artifact_read", { session_id: session, id: made.value });
    expect(read.isError).toBeFalsy();
    expect(JSON.stringify(read.structuredContent)).toContain("rows");
  });

  test("input() and the inventory", async () => {
    const asked = await run("input('name? ')");
    expect(asked.success).toBe(false);
    expect(asked.error).toContain("EOFError");
    const inspected = (
      await h.call("python_session_inspect", { session_id: session, include_namespace: true })
    ).structuredContent;
    const names = inspected.namespace.variables.map((entry: { name: string }) => entry.name);
    expect(names).toContain("x");
    expect(names).not.toContain("In");
    expect(names).not.toContain("get_ipython");
  });

  test("reset restarts the kernel: a new generation, expected_generation refuses stale cells", async () => {
    const before = (await h.call("python_session_inspect", { session_id: session })).structuredContent;
    const reset = await run("'fresh' if 'x' not in globals() else 'kept'", { reset: true });
    expect(reset).toMatchObject({
      success: true,
      value: "fresh",
      state_reset: true,
      generation: before.generation + 1,
    });
    const stale = await run("1", { expected_generation: before.generation });
    expect(stale).toMatchObject({ success: false, error_code: "STATE_CHANGED" });
    const after = (await h.call("python_session_inspect", { session_id: session })).structuredContent;
    expect(after.environment.kernel.kernel_id).toBe(before.environment.kernel.kernel_id);
  }, 60_000);

  test("a kernel killed on its host: the next call reports the lost state, then runs on", async () => {
    await run("y = 1");
    const pid = (await run("import os\nos.getpid()")).value;
    const generation = (await run("1")).generation;
    process.kill(pid, "SIGKILL");
    const lost = await run("y");
    expect(lost.success).toBe(false);
    expect(lost.state).toBe("cleared");
    const next = await run("'y' in globals()");
    expect(next).toMatchObject({ success: true, value: false });
    expect(next.generation).toBeGreaterThan(generation);
  }, 90_000);
});
