// Long runs: python_start / python_run / python_cancel, the busy slot, history, and cancellation that
// leaves no late effects.
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Harness, sessionPerTest, waitFor } from "../support/harness.ts";

// One server for the file; each test runs in a session (a worker and a project) of its own, and a test
// that needs the server itself starts one.
const h = sessionPerTest();

async function start(code: string, args: Record<string, unknown> = {}) {
  const started = await h.call("python_start", { code, ...args });
  expect(started.isError).toBe(false);
  return started.structuredContent;
}

async function finished(runId: string, timeoutMs = 15_000) {
  let result: Record<string, any> = {};
  await waitFor(
    async () => {
      result = (await h.call("python_run", { run_id: runId })).structuredContent;
      return "success" in result;
    },
    { timeoutMs, intervalMs: 50, what: `run ${runId} to finish` },
  );
  return result;
}

test("python_start returns at once; python_run shows live output, then the retained result", async () => {
  const began = performance.now();
  const started = await start(
    "import time\nprint('first', flush=True)\ntime.sleep(3)\nprint('second')\n'done'",
  );
  expect(performance.now() - began).toBeLessThan(2_000);
  expect(started).toMatchObject({
    status: "starting",
    poll_tool: "python_run",
    cancel_tool: "python_cancel",
  });
  expect(started.run_id).toMatch(/^[0-9a-f-]{36}$/);

  await waitFor(
    async () => {
      const live = (await h.call("python_run", {})).structuredContent;
      return live.status === "running" && live.stdout.includes("first");
    },
    { timeoutMs: 10_000, intervalMs: 50, what: "live output" },
  );
  const live = (await h.call("python_run", { run_id: started.run_id })).structuredContent;
  expect(live.success).toBeUndefined();
  expect(live.output_limit_bytes_per_stream).toBe(65_536);
  expect(typeof live.native_stderr).toBe("string");

  const result = await finished(started.run_id);
  expect(result.success).toBe(true);
  expect(result.stdout).toBe("first\nsecond\n");
  expect(result.value).toBe("done");
  // Omitting run_id with nothing active shows the latest result.
  expect((await h.call("python_run", {})).structuredContent.run_id).toBe(started.run_id);
});

test("a second cell while one runs fails promptly with the busy message", async () => {
  const started = await start("import time\ntime.sleep(5)");
  await waitFor(async () => (await h.call("python_run", {})).structuredContent.status === "running", {
    what: "run to start",
    timeoutMs: 10_000,
  });
  const began = performance.now();
  const busy = await h.call("execute_python", { code: "1" });
  expect(performance.now() - began).toBeLessThan(1_000);
  expect(busy.isError).toBe(true);
  expect(busy.structuredContent.error).toBe("A cell is already running; inspect python_run or cancel it");
  const busyStart = await h.call("python_start", { code: "1" });
  expect(busyStart.structuredContent.error).toBe(
    "A cell is already running; inspect python_run or cancel it",
  );
  await h.call("python_cancel", { run_id: started.run_id });
});

test("python_cancel stops the run, keeps the namespace and the marker it would write never appears", async () => {
  const marker = join(h.dir, "late");
  await h.run("kept = 'yes'");
  const started = await start(
    `import time\ntime.sleep(1.5)\nopen(${JSON.stringify(marker)}, 'w').write('late')`,
  );
  await Bun.sleep(300);
  const cancel = await h.call("python_cancel", { run_id: started.run_id });
  expect(cancel.structuredContent).toMatchObject({
    cancel_requested: true,
    run_id: started.run_id,
    external_effects: "May already have occurred; never retried automatically",
  });
  const result = await finished(started.run_id, 5_000);
  expect(result.success).toBe(false);
  expect(result.error).toBe("Execution cancelled");
  expect(result.state).toBe("preserved");
  await Bun.sleep(1_800);
  expect(existsSync(marker)).toBe(false);
  expect((await h.run("kept")).value).toBe("yes");
});

test("cancelling with nothing active is an error result", async () => {
  const none = await h.call("python_cancel", {});
  expect(none.isError).toBe(true);
  expect(none.structuredContent).toMatchObject({ cancel_requested: false, error: "No matching active run" });
});

test("a new cell right after a cancel waits for the slot instead of failing", async () => {
  await start("import time\ntime.sleep(30)");
  await waitFor(async () => (await h.call("python_run", {})).structuredContent.status === "running", {
    what: "run to start",
    timeoutMs: 10_000,
  });
  await h.call("python_cancel", {});
  const next = await h.run("'next'");
  expect(next.value).toBe("next");
});

test("history keeps 64 runs: the 65th evicts the first", async () => {
  const first = await h.run("0");
  for (let i = 1; i < 65; i++) await h.run(String(i));
  const gone = await h.call("python_run", { run_id: first.run_id });
  expect(gone.isError).toBe(true);
  expect(gone.structuredContent.error).toBe("Run not found; history retains last 64 runs");
  const second = (await h.call("python_run", {})).structuredContent;
  expect(second.value).toBe(64);
});

test("a start with a stale expected_generation records the refusal in its result", async () => {
  await h.run("1");
  const started = await start("2", { expected_generation: 5 });
  const result = await finished(started.run_id);
  expect(result.error).toStartWith("STATE_CHANGED: stale expected_generation");
});

test("a cell over its memory budget is stopped and no worker remains", async () => {
  const own = await Harness.start({ args: ["--max-memory-mib", "48"] });
  try {
    const result = await own.run("blob = b'x' * (128 * 1024 * 1024)\nimport time\ntime.sleep(5)", {
      timeout: 30,
    });
    expect(result.success).toBe(false);
    expect(result.error).toBe("Python worker exceeded RSS budget; variables cleared");
    expect(result.state).toBe("cleared");
    await waitFor(() => own.children().length === 0, { timeoutMs: 5_000, what: "the worker to be gone" });
    expect((await own.run("1 + 1")).state_reset).toBe(true);
  } finally {
    await own.close();
  }
});
