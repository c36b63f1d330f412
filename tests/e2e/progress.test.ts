// Live progress: a call with a progress token gets notifications/progress while its cell runs (a
// heartbeat when silent, the newest output when chatty), none after the response, none without a token.
// runner: waiting lane
import { afterEach, beforeEach, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Progress } from "@modelcontextprotocol/client";
import { Harness, waitFor } from "../support/harness.ts";

let h: Harness;
let errors: string[];
beforeEach(async () => {
  h = await Harness.start();
  errors = [];
  // A notification for a token the client no longer tracks (after the response) lands here.
  h.client.onerror = (error) => errors.push(error.message);
});
afterEach(async () => {
  await h.close();
});

interface Seen extends Progress {
  at: number;
}

async function callWithProgress(name: string, args: Record<string, unknown>, timeoutMs = 2_000) {
  const seen: Seen[] = [];
  const began = performance.now();
  const result = await h.client.callTool(
    { name, arguments: args },
    {
      timeout: timeoutMs,
      resetTimeoutOnProgress: true,
      onprogress: (progress) => seen.push({ ...progress, at: performance.now() - began }),
    },
  );
  return { result: result as { isError?: boolean; structuredContent: Record<string, any> }, seen };
}

/** A cell that holds the server a while, so anything sent late for an earlier token would arrive first. */
async function settle() {
  await h.run("import time\ntime.sleep(1.5)");
}

function expectWellFormed(seen: Seen[]) {
  for (let i = 1; i < seen.length; i++) {
    expect(seen[i]?.progress).toBeGreaterThan(seen[i - 1]?.progress as number);
  }
  for (const progress of seen) expect(progress.message).toMatch(/\d+\.\d s/);
}

test("a silent 6 s cell completes under a 2 s request timeout thanks to heartbeats", async () => {
  const { result, seen } = await callWithProgress("execute_python", {
    code: "import time\ntime.sleep(6)\n'ok'",
  });
  expect(result.isError).toBe(false);
  expect(result.structuredContent.value).toBe("ok");
  expect(seen.length).toBeGreaterThanOrEqual(6);
  expectWellFormed(seen);
  expect(seen[0]?.message).toContain("no output yet");
  await settle();
  expect(errors).toEqual([]);
});

test("a chatty 6 s cell completes too; messages carry the newest lines, at a bounded pace", async () => {
  const code =
    "import time\nfor i in range(120):\n    print(f'line {i} ' + 'é' * 200, flush=True)\n    time.sleep(0.05)";
  const { result, seen } = await callWithProgress("execute_python", { code });
  expect(result.isError).toBe(false);
  expectWellFormed(seen);
  const withOutput = seen.filter((progress) => progress.message?.includes("line "));
  expect(withOutput.length).toBeGreaterThan(3);
  for (const progress of seen) {
    const quoted = progress.message?.split("newest output:\n")[1] ?? "";
    expect(new TextEncoder().encode(quoted).length).toBeLessThanOrEqual(512);
    // Cut on a character boundary: no replacement characters from a split é.
    expect(quoted).not.toContain("\ufffd");
  }
  // At most four a second: over the whole call, the count stays within that pace (plus the first).
  const spanSeconds = ((seen.at(-1)?.at ?? 0) - (seen[0]?.at ?? 0)) / 1000;
  expect(seen.length).toBeLessThanOrEqual(Math.ceil(spanSeconds * 4) + 2);
  await settle();
  expect(errors).toEqual([]);
});

test("python_execute_file reports progress for a saved file, fresh mode included", async () => {
  const path = join(h.project, "job.py");
  writeFileSync(
    path,
    "import time\nfor i in range(15):\n    print('step', i, flush=True)\n    time.sleep(0.2)\n",
  );
  const health = await h.health();
  for (const mode of ["persistent", "fresh"]) {
    const { result, seen } = await callWithProgress(
      "python_execute_file",
      { session_id: health.server.session_id, path: "job.py", mode },
      10_000,
    );
    expect(result.isError).toBe(false);
    expectWellFormed(seen);
    expect(seen.some((progress) => progress.message?.includes("step "))).toBe(true);
  }
  await settle();
  expect(errors).toEqual([]);
});

test("without a progress token nothing is sent", async () => {
  const result = await h.call("execute_python", {
    code: "import time\nfor i in range(20):\n    print(i, flush=True)\n    time.sleep(0.1)",
  });
  expect(result.isError).toBe(false);
  await settle();
  expect(errors).toEqual([]);
});

test("a cancelled call stops its notifications and the cell is cancelled as before", async () => {
  const controller = new AbortController();
  const seen: Progress[] = [];
  const call = h.client.callTool(
    {
      name: "execute_python",
      // After the interrupt the cell goes on printing for a second before it stops: the call is cancelled
      // by then, so that output must not be reported to the client, which has forgotten its token.
      arguments: {
        code: "import time\ntry:\n    while True:\n        print('tick', flush=True)\n        time.sleep(0.1)\nexcept KeyboardInterrupt:\n    for _ in range(10):\n        print('stopping', flush=True)\n        time.sleep(0.1)\n    raise",
      },
    },
    { signal: controller.signal, onprogress: (progress) => seen.push(progress), timeout: 30_000 },
  );
  await waitFor(() => seen.length >= 3, { timeoutMs: 10_000, what: "three progress notifications" });
  controller.abort();
  await expect(call).rejects.toThrow();
  let latest: Record<string, any> = {};
  await waitFor(
    async () => {
      latest = (await h.call("python_run", {})).structuredContent;
      return "success" in latest;
    },
    { timeoutMs: 10_000, intervalMs: 50, what: "the cancelled run to end" },
  );
  expect(latest.success).toBe(false);
  expect(latest.error).toBe("Execution cancelled");
  await settle();
  expect(errors).toEqual([]);
});
