// Kernel sessions when things go wrong (docs/kernels.md, "Faults"), on a real Jupyter Server on loopback:
// bad arguments and a bad kernel server answer at once with a code and what to do; kernels this server
// started never outlive it (session close, stdin closed, SIGTERM, kill -9 and the next start); the Jupyter
// server dying mid-cell ends the run as "outcome unknown" and the next run gets a new kernel once the
// server is back; a network down for a few seconds mid-cell is reconnected through while the run waits,
// and one down longer leaves the kernel and its variables as they were; a kernel restarted behind the
// session (by another client, or while our WebSocket was down, so that no restart notice reached us) ends
// the next run with what happened instead of a hang.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, pidAlive, tempDir, waitFor } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";

const noJupyter = jupyterMissing();
if (noJupyter) console.warn(`skipping the kernel fault tests: ${noJupyter}`);

const TOKEN_VAR = "KERNEL_FAULT_TOKEN";

/**
 * A server whose kernels file names `jupyter` as "lab" (at `url`, else the server's own), "wrong" with a
 * bad token and "down"; in `home` if given.
 */
async function startServer(
  jupyter: JupyterServer,
  home?: string,
  url = jupyter.url,
  more: Record<string, unknown> = {},
): Promise<Harness> {
  let file = "";
  return await Harness.start({
    beforeStart: (project) => {
      file = join(project, "kernels.json");
      writeFileSync(
        file,
        JSON.stringify({
          kernelServers: {
            lab: { url, token: `\${${TOKEN_VAR}}` },
            wrong: { url: jupyter.url, token: "not-the-token" },
            down: { url: "http://127.0.0.1:9/", token: "x" },
            ...more,
          },
        }),
      );
    },
    get args() {
      return ["--kernels", file];
    },
    env: {
      [TOKEN_VAR]: jupyter.token,
      ...(home ? { HOME: home, XDG_CACHE_HOME: join(home, ".cache") } : {}),
    },
  });
}

// One Jupyter server for the tests that leave it running (a start costs the Jupyter server a second of
// CPU); the test that crashes its server has one of its own.
let shared: JupyterServer | undefined;
beforeAll(async () => {
  if (noJupyter === undefined) shared = await JupyterServer.start();
}, 60_000);
afterAll(async () => {
  if (shared) expect(await shared.stopListing()).toEqual([]);
}, 60_000);

describe.skipIf(noJupyter !== undefined)("kernel sessions: bad input and faults", () => {
  let jupyter: JupyterServer;
  let h: Harness;
  let fake: ReturnType<typeof Bun.serve> | undefined;
  beforeAll(async () => {
    jupyter = shared as JupyterServer;
    // A kernelspec that is not Python: refused before any kernel starts.
    const specs = join(jupyter.root, ".local/share/jupyter/kernels/notpython");
    mkdirSync(specs, { recursive: true });
    writeFileSync(
      join(specs, "kernel.json"),
      JSON.stringify({ argv: ["/bin/false", "{connection_file}"], display_name: "R", language: "R" }),
    );
    // A kernel that says it runs Python 3.9: refused at open, and shut down again.
    const old = join(jupyter.root, ".local/share/jupyter/kernels/oldpython");
    mkdirSync(old, { recursive: true });
    const patched = [
      "import ipykernel.ipkernel as k",
      "k.IPythonKernel.language_info = dict(k.IPythonKernel.language_info, version='3.9.18')",
      "from ipykernel import kernelapp",
      "kernelapp.launch_new_instance()",
    ].join("\n");
    writeFileSync(
      join(old, "kernel.json"),
      JSON.stringify({
        argv: ["/usr/bin/python3", "-c", patched, "-f", "{connection_file}"],
        display_name: "Python 3.9",
        language: "python",
      }),
    );
    // A server that answers garbage, and one that never answers a kernel start.
    fake = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(request) {
        const path = new URL(request.url).pathname;
        if (path.startsWith("/garbage/")) return new Response("<html>a login page</html>", { status: 200 });
        if (path === "/slow/api/kernelspecs") {
          return Response.json({
            default: "python3",
            kernelspecs: {
              python3: {
                name: "python3",
                spec: { language: "python", argv: [], display_name: "P", env: {}, metadata: {} },
                resources: {},
              },
            },
          });
        }
        return new Promise<Response>(() => {});
      },
    });
    h = await startServer(jupyter, undefined, jupyter.url, {
      garbage: { url: `http://127.0.0.1:${fake.port}/garbage/`, token: "x" },
      slow: { url: `http://127.0.0.1:${fake.port}/slow/`, token: "x", startTimeoutS: 1 },
    });
  }, 90_000);
  afterAll(async () => {
    await h?.close();
    fake?.stop(true);
    if (jupyter) expect(await jupyter.kernels()).toEqual([]);
  }, 60_000);

  test("bad arguments are -32602 or a coded error, and open nothing", async () => {
    const both = h.call("python_session_open", { name: "x", kernel_server: "lab", python: "python3" });
    await expect(both).rejects.toThrow("python cannot be combined with kernel_server");
    const orphanKernel = h.call("python_session_open", { name: "x", project: ".", kernel: "python3" });
    await expect(orphanKernel).rejects.toThrow("kernel and kernel_id need kernel_server");
    const unknown = await h.call("python_session_open", { name: "x", kernel_server: "nope" });
    expect(unknown.structuredContent).toMatchObject({ error_code: "KERNEL_SERVER_UNKNOWN" });
    expect(unknown.structuredContent.error).toContain("configured: lab, wrong, down, garbage, slow");
    const refused: [Record<string, unknown>, string, string][] = [
      [{ kernel_id: "no-such" }, "KERNEL_NOT_FOUND", "No kernel no-such runs"],
      [{ kernel: "nosuchspec" }, "KERNEL_SERVER_FAILED", 'no kernelspec "nosuchspec"'],
      [{ kernel: "notpython" }, "PYTHON_UNSUPPORTED", "not Python"],
      [{ kernel: "oldpython" }, "PYTHON_UNSUPPORTED", "Python 3.9.18; repl-mcp needs 3.10"],
      [{ project: "/no/such/dir" }, "PROJECT_INVALID", "cannot be entered on the kernel's host"],
    ];
    for (const [args, code, message] of refused) {
      const opened = await h.call("python_session_open", { name: "x", kernel_server: "lab", ...args });
      expect(opened.structuredContent).toMatchObject({ error_code: code });
      expect(opened.structuredContent.error).toContain(message);
    }
    expect((await h.call("python_session_list")).structuredContent.sessions).toHaveLength(1);
    // The kernel started for the bad project was shut down again.
    expect(await jupyter.kernels()).toEqual([]);
  }, 90_000);

  test("a wrong token and a server that is down: which server, what failed, what to do", async () => {
    const wrong = (await h.call("python_session_open", { name: "x", kernel_server: "wrong" }))
      .structuredContent;
    expect(wrong).toMatchObject({ error_code: "KERNEL_SERVER_FAILED" });
    expect(wrong.error).toContain('Kernel server "wrong"');
    expect(wrong.error).toContain("refused the token");
    expect(wrong.error).not.toContain("not-the-token");
    const down = (await h.call("python_session_open", { name: "x", kernel_server: "down" }))
      .structuredContent;
    expect(down).toMatchObject({ error_code: "KERNEL_SERVER_FAILED" });
    expect(down.error).toContain("could not be reached");
    const garbage = (await h.call("python_session_open", { name: "x", kernel_server: "garbage" }))
      .structuredContent;
    expect(garbage).toMatchObject({ error_code: "KERNEL_SERVER_FAILED" });
    expect(garbage.error).toContain("not the Jupyter API");
    const started = performance.now();
    const slow = (await h.call("python_session_open", { name: "x", kernel_server: "slow" }))
      .structuredContent;
    expect(slow).toMatchObject({ error_code: "KERNEL_SERVER_FAILED" });
    expect(slow.error).toContain("did not answer in time");
    // Bounded by the entry's startTimeoutS (1 s), not the default minute.
    expect(performance.now() - started).toBeLessThan(30_000);
    // Local sessions and health are unaffected.
    expect((await h.run("1 + 1")).value).toBe(2);
    expect((await h.health()).kernel_servers.map((server: { name: string }) => server.name)).toEqual([
      "lab",
      "wrong",
      "down",
      "garbage",
      "slow",
    ]);
    const listed = (await h.call("python_session_list")).structuredContent;
    expect(listed.kernel_servers.map((server: { name: string }) => server.name)).toContain("lab");
    const inspected = (await h.call("python_session_inspect", {})).structuredContent;
    expect(inspected.kernel_servers[0]).toEqual({ name: "lab", url: jupyter.url, kernel: null });
  }, 60_000);

  test("closing the session shuts its kernel down", async () => {
    const opened = (await h.call("python_session_open", { name: "k", kernel_server: "lab" }))
      .structuredContent;
    expect(await jupyter.kernels()).toEqual([opened.environment.kernel.kernel_id]);
    await h.call("python_session_close", { session_id: opened.session_id });
    expect(await jupyter.kernels()).toEqual([]);
  }, 60_000);

  test("the server exiting (stdin closed, SIGTERM, SIGINT) shuts its kernels down", async () => {
    const other = await startServer(jupyter);
    await other.call("python_session_open", { name: "a", kernel_server: "lab" });
    await other.call("python_session_open", { name: "b", kernel_server: "lab" });
    expect(await jupyter.kernels()).toHaveLength(2);
    await other.close();
    expect(await jupyter.kernels()).toEqual([]);
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      const signalled = await startServer(jupyter);
      await signalled.call("python_session_open", { name: "a", kernel_server: "lab" });
      expect(await jupyter.kernels()).toHaveLength(1);
      process.kill(signalled.serverPid, signal);
      await waitFor(() => !pidAlive(signalled.serverPid), {
        timeoutMs: 20_000,
        what: `the server to exit on ${signal}`,
      });
      expect(await jupyter.kernels()).toEqual([]);
      await signalled.close();
    }
  }, 90_000);

  test("after kill -9, the next server to start shuts the kernels left behind down", async () => {
    // One home for both servers (the harness removes its own directories when it closes).
    const home = tempDir("repl-mcp-kernel-home-");
    const crashed = await startServer(jupyter, home);
    const opened = (await crashed.call("python_session_open", { name: "a", kernel_server: "lab" }))
      .structuredContent;
    const left = opened.environment.kernel.kernel_id;
    process.kill(crashed.serverPid, "SIGKILL");
    await crashed.close();
    expect(await jupyter.kernels()).toEqual([left]);
    const next = await startServer(jupyter, home);
    try {
      // Each look is a request the Jupyter server answers in Python: not every 25 ms.
      await waitFor(async () => (await jupyter.kernels()).length === 0, {
        timeoutMs: 20_000,
        intervalMs: 100,
        what: "the kernel left behind to be shut down",
      });
    } finally {
      await next.close();
      rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);
});

describe.skipIf(noJupyter !== undefined)("the Jupyter server dies during a run", () => {
  test("the run's outcome is unknown; once the server is back, the next run has a new kernel", async () => {
    let jupyter = await JupyterServer.start();
    const h = await startServer(jupyter);
    try {
      const session = (await h.call("python_session_open", { name: "k", kernel_server: "lab" }))
        .structuredContent.session_id;
      const run = async (code: string) =>
        (await h.call("execute_python", { session_id: session, code })).structuredContent;
      expect(await run("x = 1\nx")).toMatchObject({ value: 1, generation: 1 });
      const pending = run("import time\ntime.sleep(60)");
      await Bun.sleep(500);
      await jupyter.crash();
      const lost = await pending;
      // Nothing showed the kernel gone: its namespace is not declared lost (nor its generation moved on).
      expect(lost).toMatchObject({
        success: false,
        error_code: "KERNEL_CONNECTION_LOST",
        state: "preserved",
        generation: 1,
      });
      expect(lost.error).toContain("unknown");
      jupyter = await JupyterServer.start(jupyter);
      // The next run finds the kernel gone once the server answers: it runs in a new one, as if the loss
      // had been seen before it.
      const next = await run("'x' in globals()");
      expect(next).toMatchObject({ success: true, value: false, state_reset: true, generation: 2 });
    } finally {
      await h.close();
      expect(await jupyter.stopListing()).toEqual([]);
    }
  }, 120_000);
});

/** A server that reaches the shared Jupyter Server through a TcpProxy, with a kernel session open on it. */
async function sessionThroughProxy() {
  const jupyter = shared as JupyterServer;
  const proxy = TcpProxy.start(Number(new URL(jupyter.url).port));
  const h = await startServer(jupyter, undefined, proxy.url);
  const close = async () => {
    await h.close();
    proxy.stop();
    expect(await jupyter.kernels()).toEqual([]);
  };
  try {
    const session = (await h.call("python_session_open", { name: "k", kernel_server: "lab" }))
      .structuredContent.session_id;
    const call = async (tool: string, args: Record<string, unknown>) =>
      (await h.call(tool, { session_id: session, ...args })).structuredContent;
    const run = (code: string) => call("execute_python", { code });
    return { jupyter, proxy, call, run, close };
  } catch (error) {
    await close();
    throw error;
  }
}

describe.skipIf(noJupyter !== undefined)("the connection blips during a run", () => {
  test("the session reconnects, the run's end arrives, nothing runs twice", async () => {
    const { proxy, run, close } = await sessionThroughProxy();
    try {
      await run("runs = 0");
      const pending = run("import time\nruns += 1\ntime.sleep(2)\nprint('after the blip')\nruns");
      await Bun.sleep(500);
      const before = proxy.accepted;
      proxy.cut();
      const done = await pending;
      // The kernel's WebSocket came back through the proxy.
      expect(proxy.accepted).toBeGreaterThan(before);
      expect(done).toMatchObject({ success: true, value: 1, stdout: "after the blip\n", state: "preserved" });
      expect(await run("runs")).toMatchObject({ success: true, value: 1, generation: 1 });
    } finally {
      await close();
    }
  }, 60_000);
});

describe.skipIf(noJupyter !== undefined)("the network is down for a while during a run", () => {
  test("back after 5 s: the run's end arrives; down past the run's wait: its outcome is unknown, the kernel and its variables stay", async () => {
    const { proxy, call, run, close } = await sessionThroughProxy();
    /** Starts a cell that prints "begun" first, and resolves once it is running on the kernel. */
    const begin = async (code: string) => {
      const started = await call("python_start", { code: `print('begun', flush=True)\n${code}` });
      await waitFor(
        async () => String((await call("python_run", { run_id: started.run_id })).stdout).includes("begun"),
        {
          what: "the cell to run on the kernel",
        },
      );
      return started.run_id as string;
    };
    const ended = async (runId: string) => {
      let result: Record<string, unknown> = {};
      await waitFor(
        async () => {
          result = await call("python_run", { run_id: runId });
          return "success" in result;
        },
        { timeoutMs: 30_000, intervalMs: 200, what: "the run's result" },
      );
      return result;
    };
    try {
      await run("kept = 'kept'\nruns = 0");
      // Every attempt to reconnect fails for 5 s (the cell ends on the kernel meanwhile); the attempts
      // that follow reach it again while the run still waits.
      const blipped = await begin("import time\nruns += 1\ntime.sleep(1)\n'done'");
      proxy.down();
      await Bun.sleep(5_000);
      proxy.up();
      expect(await ended(blipped)).toMatchObject({
        success: true,
        value: "done",
        state: "preserved",
        generation: 1,
      });
      // Down until the run's wait is over: nothing says whether it ran, nor is it run again; the kernel
      // is not restarted, and the next cell finds what the cells before it left.
      const lost = await begin("runs += 1\ntime.sleep(1)");
      proxy.down();
      const unknown = await ended(lost);
      proxy.up();
      expect(unknown).toMatchObject({
        success: false,
        error_code: "KERNEL_CONNECTION_LOST",
        state: "preserved",
        generation: 1,
      });
      expect(String(unknown.error)).toContain("unknown");
      expect(await run("[kept, runs]")).toMatchObject({
        success: true,
        value: ["kept", 2],
        state_reset: false,
        generation: 1,
      });
    } finally {
      await close();
    }
  }, 90_000);
});

describe.skipIf(noJupyter !== undefined)("the kernel is restarted behind the session", () => {
  test("by another client, with our WebSocket up or down: the next run says so, then runs on", async () => {
    const { jupyter, proxy, call, run, close } = await sessionThroughProxy();
    try {
      expect(await run("x = 1\nx")).toMatchObject({ success: true, value: 1, generation: 1 });
      const [id] = await jupyter.kernels();

      // JupyterLab's Restart: no notice reaches the other connections; the next run finds a new process.
      await jupyter.restartKernel(id as string);
      const lost = await run("x");
      expect(lost).toMatchObject({ success: false, error_code: "WORKER_CRASHED", state: "cleared" });
      expect(lost.error).toContain("restarted behind this session");
      const next = await run("'x' in globals()\nx = 2");
      expect(next).toMatchObject({ success: true });
      expect(next.generation).toBeGreaterThan(1);

      // A restart while our WebSocket is down (its notice goes to nobody), and a run sent meanwhile.
      proxy.hold();
      await jupyter.restartKernel(id as string);
      const started = await call("python_start", { code: "'x' in globals()" });
      await waitFor(async () => (await call("python_run", { run_id: started.run_id })).status === "running", {
        what: "the run to be sent to the kernel",
      });
      proxy.release();
      let held: Record<string, unknown> = {};
      await waitFor(
        async () => {
          held = await call("python_run", { run_id: started.run_id });
          return "success" in held;
        },
        { timeoutMs: 30_000, intervalMs: 200, what: "the run's result" },
      );
      expect(held).toMatchObject({ success: false, error_code: "WORKER_CRASHED", state: "cleared" });
      expect(String(held.error)).toContain("restarted behind this session");
      expect(await run("'x' in globals()")).toMatchObject({ success: true, value: false });
    } finally {
      await close();
    }
  }, 90_000);
});
