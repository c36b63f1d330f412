// Sessions on a Jupyter kernel (docs/kernels.md), end to end: the real binary over stdio, configured
// with --kernels for a real Jupyter Server (Debian's, token auth, on loopback), and the tools of a local
// session used on a kernel session: values, output, safe previews, errors, await, start/poll/cancel,
// timeout, reset, expected_generation, pictures, artifacts, mcp calls served by the local broker,
// input(), the inventory, a file run; and the kernel's own faults. Afterwards the server lists none of
// our kernels.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { JupyterLink } from "../../src/kernels/jupyter.ts";
import { Harness, waitFor } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";
import { run as runCommand } from "../support/run.ts";

const noJupyter = jupyterMissing();
const MAKE_WHEEL = resolve(import.meta.dir, "../fixtures/python/make_wheel.py");
const noVenv =
  Bun.spawnSync(["/usr/bin/python3", "-c", "import venv, ensurepip"], { stderr: "pipe" }).exitCode === 0
    ? undefined
    : "python3-venv is not installed";
// Seeding a virtual environment with pip (ensurepip) costs ~4 s of CPU. Where the system's pip is there
// the environment goes without: its `python -m pip` is the system's pip (through the system site
// packages), which installs into the environment it runs in all the same.
const systemPip = Bun.spawnSync(["/usr/bin/python3", "-c", "import pip"], { stderr: "pipe" }).exitCode === 0;
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
        resettable: { url: jupyter.url, token: `\${${TOKEN_VAR}}`, allowReset: true },
      },
    }),
  );
  return file;
}

async function startServer(
  jupyter: JupyterServer,
  beforeStart?: (project: string) => void,
): Promise<Harness> {
  let file = "";
  return await Harness.start({
    beforeStart: (project) => {
      file = kernelsFile(project, jupyter);
      beforeStart?.(project);
    },
    get args() {
      return ["--kernels", file];
    },
    env: { [TOKEN_VAR]: jupyter.token },
  });
}

/** A second client of the same server, as the person's JupyterLab would be. */
function personOn(jupyter: JupyterServer): JupyterLink {
  return new JupyterLink(jupyter.entry("person"));
}

describe.skipIf(noJupyter !== undefined)("a session on a Jupyter kernel", () => {
  let jupyter: JupyterServer;
  let h: Harness;
  let session: string;
  const run = async (code: string, args: Record<string, unknown> = {}) =>
    (await h.call("execute_python", { session_id: session, code, ...args })).structuredContent;

  const calls = new PeerCalls();
  /** What opening the session reported while its kernel started. */
  const openProgress: string[] = [];
  const debug = console.debug;
  beforeAll(async () => {
    // The person's client (@jupyterlab/services in this process) announces its sockets on console.debug.
    console.debug = () => {};
    jupyter = await JupyterServer.start();
    h = await startServer(jupyter, (project) =>
      writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: { typed: calls.entry() } })),
    );
    const opened = await h.client.callTool(
      { name: "python_session_open", arguments: { name: "gpu", kernel_server: "lab" } },
      { onprogress: (progress) => openProgress.push(String(progress.message)), timeout: 60_000 },
    );
    expect(opened.isError).toBeFalsy();
    session = (opened.structuredContent as { session_id: string }).session_id;
  }, 90_000);
  afterAll(async () => {
    console.debug = debug;
    await h?.close();
    calls.remove();
    if (jupyter) expect(await jupyter.stopListing()).toEqual([]);
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

  test("a cell that ignores the interrupt: after the grace the kernel is restarted, state cleared", async () => {
    await run("kept = 1");
    const before = (await h.call("python_session_inspect", { session_id: session })).structuredContent;
    const stubborn = await run(
      "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n        pass",
      { timeout: 1 },
    );
    expect(stubborn).toMatchObject({ success: false, error_code: "TIMEOUT", state: "cleared" });
    const next = await run("'kept' in globals()");
    expect(next).toMatchObject({ success: true, value: false, state_reset: true });
    expect(next.generation).toBeGreaterThan(before.generation);
    const after = (await h.call("python_session_inspect", { session_id: session })).structuredContent;
    expect(after.environment.kernel.kernel_id).toBe(before.environment.kernel.kernel_id);
  }, 60_000);

  test("a kernel killed on its host: the next call reports the lost state with a new generation, then runs on", async () => {
    await run("y = 1");
    const pid = (await run("import os\nos.getpid()")).value;
    const generation = (await run("1")).generation;
    process.kill(pid, "SIGKILL");
    // Its server notices seconds later, most likely while this call runs: the answer carries the
    // generation the loss began, whichever came first, so a client holding the old one sees the change.
    const lost = await run("y", { expected_generation: generation });
    expect(lost).toMatchObject({ success: false, state_reset: true });
    expect(lost.generation).toBeGreaterThan(generation);
    const next = await run("'y' in globals()", { expected_generation: lost.generation });
    expect(next).toMatchObject({ success: true, value: false, generation: lost.generation });
  }, 90_000);

  test("mcp calls from the kernel go through this server's broker, with its registry", async () => {
    const sent = await run(createIssueCell("from the kernel"));
    // The server's log says what the broker saw, should this ever fail.
    if (sent.value !== "sent") console.error(`server stderr:\n${h.stderr}`);
    expect(sent).toMatchObject({ success: true, value: "sent" });
    expect(calls.tools()).toEqual(["create_issue"]);
    const servers = await run("mcp.servers()");
    expect(JSON.stringify(servers.value)).toContain("typed");
  }, 60_000);

  test("sh(), files and python_execute_file are the kernel's host's", async () => {
    writeFileSync(
      join(jupyter.root, "job.py"),
      "import os, sys\nprint('ran in', os.getcwd(), sys.argv[1:])\n",
    );
    const file = (
      await h.call("python_execute_file", {
        session_id: session,
        path: join(jupyter.root, "job.py"),
        argv: ["a"],
      })
    ).structuredContent;
    expect(file).toMatchObject({ success: true });
    expect(file.stdout).toContain("ran in");
    expect(file.stdout).toContain("['a']");
    const shell = await run("sh('echo $PPID > from-sh.txt')\nopen('from-sh.txt').read().strip()");
    expect(shell.success).toBe(true);
    expect(existsSync(join(jupyter.root, "from-sh.txt"))).toBe(true);
    expect(readFileSync(join(jupyter.root, "from-sh.txt"), "utf8").trim()).toBe(shell.value);
    const fresh = (
      await h.call("python_execute_file", {
        session_id: session,
        path: join(jupyter.root, "job.py"),
        mode: "fresh",
      })
    ).structuredContent;
    expect(fresh).toMatchObject({ success: true, execution_mode: "fresh" });
    // The fresh run's own kernel is gone again; the session's stays.
    expect((await jupyter.kernels()).length).toBe(1);
  }, 90_000);

  test("attaching to the person's kernel: both see the same variables; close leaves it running", async () => {
    const person = personOn(jupyter);
    const kernel = await person.start();
    try {
      expect((await kernel.execute("shared = 'from the person'")).status).toBe("ok");
      const opened = await h.call("python_session_open", {
        name: "pair",
        kernel_server: "shared",
        kernel_id: kernel.id,
      });
      expect(opened.isError).toBeFalsy();
      const pair = opened.structuredContent.session_id;
      expect(opened.structuredContent.environment.kernel).toMatchObject({
        kernel_id: kernel.id,
        owned: false,
      });
      const seen = (await h.call("execute_python", { session_id: pair, code: "shared" })).structuredContent;
      expect(seen).toMatchObject({ success: true, value: "from the person" });
      await h.call("execute_python", { session_id: pair, code: "answer = 42" });
      const back = await kernel.execute("", { userExpressions: { a: "answer" } });
      expect(back.userExpressions.a?.data?.["text/plain"]).toBe("42");
      // The person's display() still shows in the notebook between our cells.
      const shown = await kernel.execute("display('hello')", { silent: false });
      expect(shown.status).toBe("ok");
      const refused = (await h.call("execute_python", { session_id: pair, code: "1", reset: true }))
        .structuredContent;
      expect(refused).toMatchObject({ success: false, error_code: "KERNEL_RESET_REFUSED" });
      expect(
        (await h.call("execute_python", { session_id: pair, code: "answer" })).structuredContent.value,
      ).toBe(42);
      await h.call("python_session_close", { session_id: pair });
      expect(await jupyter.kernels()).toContain(kernel.id);
      const after = await kernel.execute("", { userExpressions: { a: "answer" } });
      expect(after.userExpressions.a?.data?.["text/plain"]).toBe("42");
    } finally {
      await kernel.shutdown();
      person.dispose();
    }
  }, 90_000);

  test("a reset on the first call to an attached kernel (allowReset) restarts it, as on any later call", async () => {
    const person = personOn(jupyter);
    const kernel = await person.start();
    try {
      expect((await kernel.execute("mine = 'the person'")).status).toBe("ok");
      const opened = await h.call("python_session_open", {
        name: "resettable",
        kernel_server: "resettable",
        kernel_id: kernel.id,
      });
      expect(opened.isError).toBeFalsy();
      const id = opened.structuredContent.session_id;
      const cell = async (code: string, args: Record<string, unknown> = {}) =>
        (await h.call("execute_python", { session_id: id, code, ...args })).structuredContent;
      expect(await cell("'mine' in globals()", { reset: true })).toMatchObject({
        success: true,
        value: false,
        state_reset: true,
        generation: 1,
      });
      // Restarted, not replaced: the same kernel, without the person's variables. (Asked for the shell
      // reply alone: a restart by another client may leave this connection's iopub silent.)
      const after = await kernel.evaluate({ a: "'mine' in globals()" });
      expect(after.userExpressions.a?.data?.["text/plain"]).toBe("False");
      await cell("ours = 1");
      expect(await cell("'ours' in globals()", { reset: true })).toMatchObject({
        value: false,
        state_reset: true,
        generation: 2,
      });
      await h.call("python_session_close", { session_id: id });
      expect(await jupyter.kernels()).toContain(kernel.id);
    } finally {
      await kernel.shutdown();
      person.dispose();
    }
  }, 90_000);

  test("cancelling a cell cancels its mcp call, and the journal records it", async () => {
    const started = (
      await h.call("python_start", { session_id: session, code: "mcp.typed.slow(seconds=30)" })
    ).structuredContent;
    await waitFor(() => calls.tools().includes("slow"), {
      timeoutMs: 20_000,
      what: "the slow call to reach the peer",
    });
    await h.call("python_cancel", { session_id: session, run_id: started.run_id });
    let ended: Record<string, any> = {};
    await waitFor(
      async () => {
        ended = (await h.call("python_run", { session_id: session, run_id: started.run_id }))
          .structuredContent;
        return ended.status === undefined;
      },
      { timeoutMs: 20_000, what: "the cancelled run to end" },
    );
    expect(ended).toMatchObject({ success: false, error_code: "CANCELLED" });
    const journal = (await run("[(r['tool'], r['status']) for r in mcp.journal()]")).value as string[][];
    // Sent and then cancelled: the journal never claims it did not happen.
    expect(journal).toContainEqual(["slow", "outcome_unknown"]);
  }, 60_000);

  test("history, notebook export and checkpoints work on the kernel's host", async () => {
    await run("kept = {'a': [1, 2]}");
    const history = await run("repl_history()[-1]['lines'] > 0");
    expect(history).toMatchObject({ success: true, value: true });
    const notebook = join(jupyter.root, "session.ipynb");
    const exported = await run(`export_notebook(${JSON.stringify(notebook)})['format']`);
    expect(exported).toMatchObject({ success: true, value: "ipynb" });
    expect(JSON.parse(readFileSync(notebook, "utf8")).nbformat).toBe(4);
    const saved = join(jupyter.root, "checkpoint.json");
    expect((await run(`checkpoint(${JSON.stringify(saved)})['saved']`)).value).toBeGreaterThan(0);
    await run("del kept");
    expect((await run(`restore(${JSON.stringify(saved)})\nkept`)).value).toEqual({ a: [1, 2] });
  }, 60_000);

  test("large values become artifacts; a file on the kernel's host reaches the agent's through the store", async () => {
    const big = await run("blob = bytes(range(256)) * 40_000\nblob");
    expect(big.success).toBe(true);
    expect(big.truncated.return).toBe(true);
    expect(big.artifact?.size).toBe(256 * 40_000);
    const head = await h.call("artifact_read", {
      session_id: session,
      id: big.artifact.id,
      length: 4,
      encoding: "hex",
    });
    expect(JSON.stringify(head.structuredContent)).toContain("00010203");
    const remote = join(jupyter.root, "data.csv");
    writeFileSync(remote, "a,b\n1,2\n");
    const made = await run(`artifact(path=${JSON.stringify(remote)})['id']`);
    expect(made.success).toBe(true);
    const local = join(h.project, "copied.csv");
    const saved = await h.call("artifact_save", { session_id: session, id: made.value, path: "copied.csv" });
    expect(saved.isError).toBeFalsy();
    expect(readFileSync(local, "utf8")).toBe("a,b\n1,2\n");
  }, 60_000);

  test("opening reports progress while the kernel starts", () => {
    // The session's own opening started a kernel: a second one to watch would cost a kernel start.
    expect(openProgress[0]).toContain('starting a kernel on "lab"');
  });

  test("a flooding cell is bounded as locally: its output is cut, the server keeps going", async () => {
    const flood = await run("for _ in range(200):\n    print('x' * 100_000)\n'done'");
    expect(flood).toMatchObject({ success: true, value: "done" });
    expect(flood.truncated.stdout).toBe(true);
    expect(flood.stdout.length).toBeLessThan(200_000);
    expect(await run("6 * 7")).toMatchObject({ success: true, value: 42 });
  }, 60_000);

  test.skipIf(noVenv !== undefined)(
    "pip_install() installs into the kernel's own interpreter",
    async () => {
      // A kernelspec whose Python is a virtual environment (with the system's ipykernel), and a wheel.
      const root = jupyter.root;
      const venv = join(root, "kernel-venv");
      const made = await runCommand([
        "/usr/bin/python3",
        "-m",
        "venv",
        "--system-site-packages",
        ...(systemPip ? ["--without-pip"] : []),
        venv,
      ]);
      expect(made.code).toBe(0);
      const spec = join(root, ".local/share/jupyter/kernels/venv");
      mkdirSync(spec, { recursive: true });
      const python = join(venv, "bin", "python");
      writeFileSync(
        join(spec, "kernel.json"),
        JSON.stringify({
          argv: [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
          display_name: "venv",
          language: "python",
        }),
      );
      const wheels = join(root, "wheels");
      mkdirSync(wheels);
      expect((await runCommand(["/usr/bin/python3", MAKE_WHEEL, wheels, "replmcp-tiny", "0.1.0"])).code).toBe(
        0,
      );
      const opened = await h.call("python_session_open", {
        name: "venv",
        kernel_server: "lab",
        kernel: "venv",
      });
      const id = opened.structuredContent.session_id;
      const cell = async (code: string) =>
        (await h.call("execute_python", { session_id: id, code, timeout: 300 })).structuredContent;
      expect(await cell("import sys\nsys.executable")).toMatchObject({ value: python });
      const installed = await cell(
        `pip_install('replmcp-tiny', find_links=${JSON.stringify(wheels)}).changed`,
      );
      expect(installed).toMatchObject({
        success: true,
        value: [{ name: "replmcp-tiny", before: null, after: "0.1.0" }],
      });
      expect(await cell("import replmcp_tiny\nreplmcp_tiny.__file__.startswith(sys.prefix)")).toMatchObject({
        value: true,
      });
      await h.call("python_session_close", { session_id: id });
    },
    180_000,
  );
});
