// Issue 12, defect 10: a cancel that arrives before the worker can be interrupted (its cell frame still
// being read, or compiled, before the interrupt gate is armed) must not be lost. Each cell here would
// write a marker well within the 2 s grace if it ran to its end, so a lost cancel shows as a marker.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Harness, waitFor } from "../support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
  await h.run("ready = True"); // the worker is up, so the start and the cancel race the cell alone
});
afterAll(async () => {
  await h.close();
});

function markerCell(marker: string, padBytes: number): string {
  const pad = padBytes > 0 ? `# ${"p".repeat(padBytes)}\n` : "";
  return `${pad}import time\ntime.sleep(0.4)\nopen(${JSON.stringify(marker)}, "w").write("late")\n"finished"`;
}

async function startThenCancel(code: string) {
  const started = await h.call("python_start", { code });
  const runId = started.structuredContent.run_id as string;
  const cancel = await h.call("python_cancel", { run_id: runId });
  expect(cancel.structuredContent.cancel_requested).toBe(true);
  let result: Record<string, any> = {};
  await waitFor(
    async () => {
      result = (await h.call("python_run", { run_id: runId })).structuredContent;
      return "success" in result;
    },
    { timeoutMs: 10_000, what: "the cancelled run to finish" },
  );
  return result;
}

test("a cancel sent right after starting a 140 KB cell stops it before its effect", async () => {
  for (let attempt = 0; attempt < 3; attempt++) {
    const marker = join(h.project, `large-${attempt}.txt`);
    const result = await startThenCancel(markerCell(marker, 140_000));
    expect(result.success).toBe(false);
    expect(result.error).toBe("Execution cancelled");
    expect(result.state).toBe("preserved");
    // Had the cancel been lost, the cell would have written the marker before its result came back.
    expect(existsSync(marker)).toBe(false);
  }
  // The session is intact and usable.
  expect((await h.run("ready")).value).toBe(true);
}, 60_000);

test("a storm of start/cancel pairs loses no cancel", async () => {
  const markers: string[] = [];
  for (let i = 0; i < 40; i++) {
    const marker = join(h.project, `storm-${i}.txt`);
    markers.push(marker);
    const result = await startThenCancel(markerCell(marker, i % 2 === 0 ? 0 : 20_000));
    if (result.success !== false || existsSync(marker)) {
      throw new Error(`cancel ${i} was lost: ${JSON.stringify(result)}`);
    }
    expect(result.error).toBe("Execution cancelled");
  }
  expect(markers.filter((marker) => existsSync(marker))).toEqual([]);
  expect((await h.run("ready")).value).toBe(true);
}, 120_000);

test("a cancel that reaches a cell after it finished records what really happened", async () => {
  // A cell that ends at once: by the time python_cancel arrives it has usually finished, and then the
  // result must be its own (success and value), not a cancel that never took effect.
  for (let i = 0; i < 10; i++) {
    const marker = join(h.project, `quick-${i}.txt`);
    const started = await h.call("python_start", {
      code: `open(${JSON.stringify(marker)}, "w").write("done")\n"done"`,
    });
    const runId = started.structuredContent.run_id as string;
    await h.call("python_cancel", { run_id: runId });
    let result: Record<string, any> = {};
    await waitFor(
      async () => {
        result = (await h.call("python_run", { run_id: runId })).structuredContent;
        return "success" in result;
      },
      { timeoutMs: 10_000, what: "the run to finish" },
    );
    if (result.success) {
      expect(result.value).toBe("done");
      expect(existsSync(marker)).toBe(true);
    } else {
      expect(result.error).toBe("Execution cancelled");
    }
  }
}, 60_000);

/**
 * Aborts `controller` the moment the client hands a `method` request to its transport, so the cancel
 * follows the request immediately. (The SDK 2.x client does asynchronous work before it sends a call, so
 * an abort right after calling it would stop the call before anything reached the wire.)
 */
function abortWhenSent(controller: AbortController, method: string): void {
  const transport = h.client.transport;
  if (!transport) throw new Error("the client is not connected");
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const sending = send(message, options);
    if ("method" in message && message.method === method) {
      transport.send = send;
      controller.abort();
    }
    return sending;
  };
}

test("a client's notifications/cancelled sent right after a 140 KB cell is never lost", async () => {
  for (let attempt = 0; attempt < 3; attempt++) {
    const marker = join(h.project, `notified-${attempt}.txt`);
    const before = (await h.call("python_run", {})).structuredContent.run_id;
    const controller = new AbortController();
    abortWhenSent(controller, "tools/call");
    const pending = h.call(
      "execute_python",
      { code: markerCell(marker, 140_000) },
      { signal: controller.signal },
    );
    await expect(pending).rejects.toThrow();
    let result: Record<string, any> = {};
    await waitFor(
      async () => {
        result = (await h.call("python_run", {})).structuredContent;
        return "success" in result && result.run_id !== before;
      },
      { timeoutMs: 10_000, what: "the cancelled run to be recorded" },
    );
    expect(result.success).toBe(false);
    // Stopped either before dispatch or by the worker before its first line; never run to the end.
    expect(result.error).toStartWith("Execution cancelled");
    expect(existsSync(marker)).toBe(false);
  }
  expect((await h.run("ready")).value).toBe(true);
}, 60_000);
