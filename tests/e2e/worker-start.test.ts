// Issue 12, defect 9: a worker start that fails does not count as a generation, and a fresh-mode file
// run's live native_stderr comes from the fresh worker, not from the session's own worker.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, REAL_PYTHON, waitFor } from "../support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

test("a failed worker start leaves the generation as it was", async () => {
  // An interpreter that passes the session probe but refuses to start a worker while `flag` exists.
  const project = join(h.dir, "flaky");
  mkdirSync(project);
  const flag = join(h.dir, "refuse-worker");
  const python = join(h.dir, "flaky-python");
  writeFileSync(
    python,
    `#!/bin/sh\nif [ -e '${flag}' ] && [ "$1" = "-u" ]; then echo refusing >&2; exit 7; fi\nexec '${REAL_PYTHON}' "$@"\n`,
  );
  chmodSync(python, 0o755);
  const opened = await h.call("python_session_open", { name: "flaky", project, python });
  expect(opened.isError).toBe(false);
  const session_id = opened.structuredContent.session_id;

  writeFileSync(flag, "");
  for (let i = 0; i < 2; i++) {
    const failed = await h.run("1", { session_id });
    expect(failed.success).toBe(false);
    expect(failed.error).toBe("Python worker exited during startup");
    expect(failed.generation).toBe(0);
  }
  const inspected = await h.call("python_session_inspect", { session_id });
  expect(inspected.structuredContent.generation).toBe(0);

  rmSync(flag);
  const first = await h.run("'up'", { session_id });
  expect(first.value).toBe("up");
  expect(first.generation).toBe(1);
  expect(first.state_reset).toBe(true);
  await h.call("python_session_close", { session_id });
});

test("python_run shows the fresh worker's native stderr, not the session worker's", async () => {
  // The session's own worker keeps a child that writes to its fd 2 the whole time.
  const noisy = await h.run(
    "import subprocess\nnoise = subprocess.Popen(['sh', '-c', 'while :; do echo session-noise >&2; sleep 0.05; done'])\nnoise.pid",
  );
  expect(noisy.success).toBe(true);
  writeFileSync(
    join(h.project, "fresh.py"),
    "import os, time\nos.write(2, b'fresh-native\\n')\nprint('tick', flush=True)\ntime.sleep(30)\n",
  );
  const session_id = (await h.health()).server.session_id;
  const pending = h.call("python_execute_file", { session_id, path: "fresh.py", mode: "fresh" });
  let live: Record<string, any> = {};
  await waitFor(
    async () => {
      live = (await h.call("python_run", {})).structuredContent;
      return (live.stdout ?? "").includes("tick") && (live.native_stderr ?? "").includes("fresh-native");
    },
    { timeoutMs: 10_000, what: "live output of the fresh run" },
  );
  // Give the session worker's child time to write more while the fresh run is live.
  await waitFor(async () => (await h.call("python_run", {})).structuredContent.elapsed_ms > 500, {
    timeoutMs: 10_000,
    what: "the fresh run to be under way",
  });
  live = (await h.call("python_run", {})).structuredContent;
  expect(live.native_stderr).toContain("fresh-native");
  expect(live.native_stderr).not.toContain("session-noise");
  await h.call("python_cancel", {});
  const result = (await pending).structuredContent;
  expect(result.execution_mode).toBe("fresh");
  expect(result.stderr).not.toContain("session-noise");
  const stopped = await h.run("noise.kill()\nnoise.wait()");
  expect(stopped.success).toBe(true);
}, 30_000);
