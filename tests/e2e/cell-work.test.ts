// What a cell leaves behind: tasks, timers, threads, child processes — and the helpers sh(),
// checkpoint()/restore(), repl_history()/repl_source().
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, pidAlive, sessionPerTest, taggedPids, waitFor } from "../support/harness.ts";

// One server for the file; each test runs in a session (a worker and a project) of its own, and a test
// that needs the server itself starts one.
const h = sessionPerTest();

const q = JSON.stringify;

async function value(code: string, args: Record<string, unknown> = {}) {
  const result = await h.run(code, args);
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
  return result.value;
}

describe("no late effects after a cell or a cancel", () => {
  test("a call_later timer left by a cell is cancelled when the cell ends", async () => {
    const marker = join(h.dir, "timer");
    const result = await h.run(
      `import asyncio\nasyncio.get_event_loop().call_later(0.5, lambda: open(${q(marker)}, 'w').write('late'))\n'ok'`,
    );
    expect(result.success).toBe(true);
    expect(result.background_tasks_cancelled).toBeGreaterThanOrEqual(1);
    await Bun.sleep(1_200);
    expect(existsSync(marker)).toBe(false);
    expect(await value("'still' + ' here'")).toBe("still here");
  });

  test("a task created by an await cell is cancelled when the cell ends", async () => {
    const marker = join(h.dir, "task");
    const result = await h.run(
      `import asyncio\nasync def later():\n    await asyncio.sleep(0.5)\n    open(${q(marker)}, 'w').write('late')\nasyncio.create_task(later())\nawait asyncio.sleep(0)`,
    );
    expect(result.success).toBe(true);
    expect(result.background_tasks_cancelled).toBeGreaterThanOrEqual(1);
    await Bun.sleep(1_200);
    expect(existsSync(marker)).toBe(false);
  });

  test("a thread left running clears the state and stops the worker before it can write", async () => {
    const marker = join(h.dir, "thread");
    await h.run("kept = 1");
    const result = await h.run(
      `import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.7), open(${q(marker)}, 'w').write('late'))).start()`,
    );
    expect(result.success).toBe(false);
    expect(result.state).toBe("cleared");
    expect(result.error).toContain("Join threads before the cell ends");
    await Bun.sleep(1_200);
    expect(existsSync(marker)).toBe(false);
    const after = await h.run("'kept' in globals()");
    expect(after.value).toBe(false);
    expect(after.state_reset).toBe(true);
  });

  test("a task that refuses cancellation clears the state", async () => {
    await h.run("kept = 1");
    const result = await h.run(
      "import asyncio\nasync def stubborn():\n    while True:\n        try:\n            await asyncio.sleep(10)\n        except asyncio.CancelledError:\n            pass\nasyncio.ensure_future(stubborn())\nawait asyncio.sleep(0)",
    );
    expect(result.success).toBe(false);
    expect(result.state).toBe("cleared");
    expect(result.error).toBe("Background tasks refused cancellation; worker stopped and variables cleared");
    expect((await h.run("'kept' in globals()")).value).toBe(false);
  });

  test("executor work still running when the cell ends clears the state", async () => {
    const result = await h.run(
      "import asyncio, time\nasyncio.get_event_loop().run_in_executor(None, time.sleep, 3)\n'left running'",
    );
    expect(result.success).toBe(false);
    expect(result.state).toBe("cleared");
    expect(result.error).toContain("Join threads before the cell ends");
  });

  test("asyncio.to_thread that finishes inside the cell is fine", async () => {
    expect(await value("import asyncio\nawait asyncio.to_thread(sum, [1, 2, 3])")).toBe(6);
    expect(await value("1")).toBe(1);
  });

  test("cancelling a cell whose work would land later from a thread or to_thread: nothing lands", async () => {
    const viaThread = join(h.dir, "via-thread");
    const viaToThread = join(h.dir, "via-to-thread");
    const started = (
      await h.call("python_start", {
        code: [
          "import asyncio, threading, time",
          `t = threading.Thread(target=lambda: (time.sleep(1.5), open(${q(viaThread)}, 'w').write('x')))`,
          "t.start()",
          `await asyncio.to_thread(lambda: (time.sleep(1.5), open(${q(viaToThread)}, 'w').write('x')))`,
        ].join("\n"),
      })
    ).structuredContent;
    await Bun.sleep(400);
    await h.call("python_cancel", { run_id: started.run_id });
    await waitFor(
      async () => "success" in (await h.call("python_run", { run_id: started.run_id })).structuredContent,
      {
        timeoutMs: 5_000,
        what: "the cancelled run",
      },
    );
    await Bun.sleep(2_000);
    expect(existsSync(viaThread)).toBe(false);
    expect(existsSync(viaToThread)).toBe(false);
  });
});

describe("child processes", () => {
  test("a finished Popen leaves no zombie, yet wait() still returns its status", async () => {
    const pid = await value("import subprocess\np = subprocess.Popen(['/bin/true'])\np.pid");
    await waitFor(() => !pidAlive(pid), { timeoutMs: 3_000, what: "the child to be reaped" });
    expect(await value("p.wait()")).toBe(0);
  });

  test("server SIGKILL after a detached Popen: worker and the detached sleep are gone within 5 s", async () => {
    const own = await Harness.start();
    try {
      const started = await own.run(
        "import subprocess\ns = subprocess.Popen(['/bin/sleep', '30'], start_new_session=True)\ns.pid",
      );
      const sleeper = started.value as number;
      expect(pidAlive(sleeper)).toBe(true);
      process.kill(own.serverPid, "SIGKILL");
      await waitFor(() => !pidAlive(sleeper) && taggedPids(own.tag).length === 0, {
        timeoutMs: 5_000,
        what: "worker and sleep to die",
      });
    } finally {
      await own.close();
    }
  });

  test("cancel kills a detached child started by the running cell", async () => {
    const started = (
      await h.call("python_start", {
        code: "import subprocess, time\ns = subprocess.Popen(['/bin/sleep', '30'], start_new_session=True)\nprint(s.pid, flush=True)\ntime.sleep(30)",
      })
    ).structuredContent;
    let pid = 0;
    await waitFor(
      async () => {
        const live = (await h.call("python_run", { run_id: started.run_id })).structuredContent;
        pid = Number.parseInt(live.stdout ?? "", 10);
        return pid > 0;
      },
      { timeoutMs: 10_000, what: "the child pid" },
    );
    await h.call("python_cancel", {});
    await waitFor(() => !pidAlive(pid), { timeoutMs: 5_000, what: "the detached child to die" });
  });

  test("a grandchild that escaped with setsid and keeps stderr open does not hold up a reset", async () => {
    const escaped = await value("import subprocess\nsubprocess.Popen(['setsid', 'sleep', '25']).pid");
    try {
      const began = performance.now();
      const reset = await h.run("'fresh'", { reset: true });
      expect(reset.value).toBe("fresh");
      expect(performance.now() - began).toBeLessThan(8_000);
    } finally {
      process.kill(escaped, "SIGKILL");
    }
  });

  test("multiprocessing with the spawn context works", async () => {
    const result = await value(
      "import multiprocessing as mp\nwith mp.get_context('spawn').Pool(2) as pool:\n    out = pool.map(abs, [-1, -2, -3])\nout",
      { timeout: 60 },
    );
    expect(result).toEqual([1, 2, 3]);
  }, 60_000);
});

describe("sh()", () => {
  test("returns stdout with returncode, stderr, ok; follows os.chdir; env merges", async () => {
    const out = await value(
      "import os\nos.chdir('/tmp')\nr = sh('pwd; echo err >&2; echo $REPL_SH_X', env={'REPL_SH_X': 'merged'})\n[str(r), r.returncode, r.stderr, r.ok, r.truncated]",
    );
    expect(out).toEqual(["/tmp\nmerged\n", 0, "err\n", true, false]);
  });

  test("a nonzero exit raises ShellError with check=True and returns with check=False", async () => {
    const raised = await value(
      "try:\n    sh('exit 3')\nexcept Exception as e:\n    out = [type(e).__name__, str(e), e.returncode]\nout",
    );
    expect(raised).toEqual(["ShellError", "Shell exited with status 3; inspect exception.stderr", 3]);
    expect(await value("r = sh('exit 4', check=False)\n[r.returncode, r.ok]")).toEqual([4, false]);
  });

  test("output is bounded, the timeout kills the group and background children do not survive", async () => {
    expect(await value("r = sh('yes | head -c 200000')\n[len(r.encode()), r.truncated]")).toEqual([
      50_000,
      true,
    ]);
    const timed = await value(
      "import subprocess\ntry:\n    sh('sleep 30', timeout=0.3)\nexcept subprocess.TimeoutExpired:\n    out = 'timeout'\nout",
    );
    expect(timed).toBe("timeout");
    const pid = await value("int(sh('sleep 30 >/dev/null 2>&1 & echo $!').strip())");
    await waitFor(() => !pidAlive(pid), { timeoutMs: 3_000, what: "the background child to be killed" });
    const bad = await value(
      "try:\n    sh('true', timeout=float('inf'))\nexcept ValueError:\n    out = 'ValueError'\nout",
    );
    expect(bad).toBe("ValueError");
  });
});

describe("history and checkpoints", () => {
  test("repl_history / repl_source, and tracebacks through functions from older cells show their lines", async () => {
    const first = await h.run("def boom():\n    raise RuntimeError('from an old cell')");
    const failed = await h.run("boom()");
    expect(failed.error).toContain("raise RuntimeError('from an old cell')");
    expect(failed.error).toContain(`<repl:${first.run_id}>`);
    expect(await value(`repl_source(${q(first.run_id)})`)).toBe(
      "def boom():\n    raise RuntimeError('from an old cell')",
    );
    const history = await value("[entry['run_id'] for entry in repl_history()]");
    expect(history).toContain(first.run_id);
    const unknown = await value(
      "try:\n    repl_source('nope')\nexcept ValueError as e:\n    out = str(e)\nout",
    );
    expect(unknown).toBe("Run source unknown or evicted (source history: 64 runs / 1 MiB)");
  });

  test("checkpoint writes JSON-safe values privately and atomically; restore validates before merging", async () => {
    const path = join(h.dir, "state.json");
    const saved = await value(
      `numbers = [1, 2]\nname = 'n'\nclass C: pass\nobj = C()\ncheckpoint(${q(path)})`,
    );
    expect(saved.saved).toBe(2);
    expect(Object.keys(saved.skipped)).toEqual(expect.arrayContaining(["obj", "C"]));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const document = JSON.parse(readFileSync(path, "utf8"));
    expect(document.format).toBe("repl-checkpoint-v1");
    expect((await h.run("1", { reset: true })).state_reset).toBe(true);
    expect(await value(`restore(${q(path)})`)).toEqual({ restored: 2, state: "merged" });
    expect(await value("[numbers, name]")).toEqual([[1, 2], "n"]);
    const evil = join(h.dir, "evil.json");
    writeFileSync(
      evil,
      JSON.stringify({
        format: "repl-checkpoint-v1",
        values: { numbers: [9], sh: 1 },
        skipped: {},
        omitted: 0,
      }),
    );
    const refused = await value(
      `try:\n    restore(${q(evil)})\nexcept ValueError:\n    out = 'refused'\nout`,
    );
    expect(refused).toBe("refused");
    expect(await value("numbers")).toEqual([1, 2]);
  });
});
