// Long cells as MCP tasks (protocol 2025-11-25), the task methods spoken by tests/support/legacy-tasks.ts:
// the task id is the run id, tasks/result is the plain call's result, tasks/cancel stops the run for good.
import { beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { CallToolResult, Task } from "@modelcontextprotocol/client";
import { CallToolResultSchema, ListToolsResultSchema } from "@modelcontextprotocol/core";
import { Harness, sessionPerTest, waitFor } from "../support/harness.ts";
import { LegacyTasks } from "../support/legacy-tasks.ts";

// One server for the file; each test's tasks run in a session (a worker and a project) of its own. The
// tasks/list test lists every task of a server, so it starts one of its own.
const h = sessionPerTest();
let tasks: LegacyTasks;
beforeAll(() => {
  tasks = new LegacyTasks(h.server.client);
});

const RELATED = "io.modelcontextprotocol/related-task";

/** Starts a tool call as a task in the test's session and returns the task the server created. */
async function startTask(name: string, args: Record<string, unknown>, ttl?: number): Promise<Task> {
  return await tasks.create(name, { session_id: h.id, ...args }, { ttl });
}

async function taskResult(taskId: string) {
  return await tasks.result(taskId);
}

function withoutMeta(result: Record<string, unknown>) {
  const { _meta: _ignored, ...rest } = result;
  return rest;
}

test("the execution tools declare optional task support and the server the tasks capability", async () => {
  // tools/list by hand: after the SDK's listTools the shared client would check every later result against
  // the tools' output schemas (a few tenths of a second of CPU to compile them), which no test here asks for.
  const { tools } = await h.server.client.request(
    { method: "tools/list", params: {} },
    ListToolsResultSchema,
  );
  const support = Object.fromEntries(tools.map((tool) => [tool.name, tool.execution?.taskSupport]));
  expect(support.execute_python).toBe("optional");
  expect(support.python_execute_file).toBe("optional");
  expect(support.python_health).toBeUndefined();
  expect(support.python_start).toBeUndefined();
  expect(h.server.client.getServerCapabilities()?.tasks).toEqual({
    list: {},
    cancel: {},
    requests: { tools: { call: {} } },
  });
});

test("a task runs like python_start: working with live status, then the plain call's result", async () => {
  const task = await startTask("execute_python", {
    code: "import time\nprint('warming up', flush=True)\ntime.sleep(1.5)\nprint('done')\n6*7",
  });
  expect(task.status).toBe("working");
  expect(task.ttl).toBe(3_600_000);
  expect(task.pollInterval).toBeGreaterThan(0);
  // The task id is the run id: python_run sees the active run under it.
  const live = (await h.call("python_run", { run_id: task.taskId })).structuredContent;
  expect(live.run_id).toBe(task.taskId);
  expect(["starting", "running"]).toContain(live.status);
  await waitFor(
    async () => {
      const now = await tasks.get(task.taskId);
      return now.status === "working" && (now.statusMessage ?? "").includes("warming up");
    },
    { timeoutMs: 10_000, intervalMs: 50, what: "status message with the newest output" },
  );
  const result = await taskResult(task.taskId);
  expect(result._meta?.[RELATED]).toEqual({ taskId: task.taskId });
  expect(result.isError).toBe(false);
  expect(result.structuredContent.value).toBe(42);
  expect(result.structuredContent.run_id).toBe(task.taskId);
  // Exactly what the plain call returns for that run (python_run renders the retained result the same way).
  const plain = await h.call("python_run", { run_id: task.taskId });
  expect(withoutMeta(result)).toEqual(withoutMeta(plain) as never);
  const ended = await tasks.get(task.taskId);
  expect(ended.status).toBe("completed");
  // A call without task still behaves as before.
  expect((await h.run("6*7")).value).toBe(42);
});

test("a task polled to its end gives its result, with progress while it runs", async () => {
  const kinds: string[] = [];
  const progress: number[] = [];
  let final: CallToolResult | undefined;
  const stream = tasks.stream(
    "execute_python",
    { session_id: h.id, code: "import time\ntime.sleep(1)\n'streamed'" },
    { onprogress: (update) => progress.push(update.progress) },
  );
  for await (const message of stream) {
    kinds.push(message.type);
    if (message.type === "result") final = message.result;
    if (message.type === "error") throw message.error;
  }
  expect(kinds[0]).toBe("taskCreated");
  expect(kinds.at(-1)).toBe("result");
  expect((final?.structuredContent as Record<string, unknown> | undefined)?.value).toBe("streamed");
  // The token stays valid for the task's lifetime (2025-11-25), so progress keeps coming after creation.
  expect(progress.length).toBeGreaterThanOrEqual(2);
});

test("a failing cell makes a failed task whose result is the plain error result", async () => {
  const task = await startTask("execute_python", { code: "1/0" });
  const result = await taskResult(task.taskId);
  expect(result.isError).toBe(true);
  expect(result.structuredContent.error).toContain("ZeroDivisionError");
  const ended = await tasks.get(task.taskId);
  expect(ended.status).toBe("failed");
  expect(ended.statusMessage).toContain("ZeroDivisionError");
});

test("tasks/cancel stops the run: cancelled at once, and the marker it would write never appears", async () => {
  const marker = join(h.dir, "late");
  await h.run("kept = 'yes'");
  const task = await startTask("execute_python", {
    code: `import time\nprint('started', flush=True)\ntime.sleep(1.5)\nopen(${JSON.stringify(marker)}, 'w').write('late')`,
  });
  await waitFor(async () => ((await tasks.get(task.taskId)).statusMessage ?? "").includes("started"), {
    timeoutMs: 10_000,
    intervalMs: 50,
    what: "the cell to start",
  });
  const cancelled = await tasks.cancel(task.taskId);
  expect(cancelled.status).toBe("cancelled");
  expect((await tasks.get(task.taskId)).status).toBe("cancelled");
  const result = await taskResult(task.taskId);
  expect(result.structuredContent.success).toBe(false);
  expect(result.structuredContent.error).toBe("Execution cancelled");
  expect(result.structuredContent.state).toBe("preserved");
  // Cancelling an ended task is refused.
  await expect(tasks.cancel(task.taskId)).rejects.toThrow(/already ended/);
  await h.run("import time\ntime.sleep(1.8)");
  expect(existsSync(marker)).toBe(false);
  expect((await h.run("kept")).value).toBe("yes");
});

test("python_cancel on a task's run shows as a cancelled task", async () => {
  const task = await startTask("execute_python", { code: "import time\ntime.sleep(30)" });
  const cancel = await h.call("python_cancel", { run_id: task.taskId });
  expect(cancel.structuredContent.cancel_requested).toBe(true);
  const result = await taskResult(task.taskId);
  // Before or after the cell reached the worker, depending on the race.
  expect(result.structuredContent.error).toStartWith("Execution cancelled");
  expect((await tasks.get(task.taskId)).status).toBe("cancelled");
});

test("a task while the session is busy fails with the busy result; a task on a saved file works", async () => {
  const long = await startTask("execute_python", { code: "import time\ntime.sleep(30)" });
  const busy = await startTask("execute_python", { code: "1" });
  const refused = await taskResult(busy.taskId);
  expect(refused.isError).toBe(true);
  expect(refused.structuredContent.error).toBe("A cell is already running; inspect python_run or cancel it");
  expect((await tasks.get(busy.taskId)).status).toBe("failed");
  await tasks.cancel(long.taskId);
  await taskResult(long.taskId);

  await h.run(`open('job.py', 'w').write("import sys\\nprint('args', sys.argv[1:])\\n")`);
  const file = await startTask("python_execute_file", {
    session_id: h.id,
    path: "job.py",
    argv: ["a", "b"],
    mode: "fresh",
  });
  const ran = await taskResult(file.taskId);
  expect(ran.structuredContent.stdout).toBe("args ['a', 'b']\n");
  expect(ran.structuredContent.execution_mode).toBe("fresh");
});

test("tasks/list pages through the retained tasks", async () => {
  const own = await Harness.start();
  try {
    const ownTasks = new LegacyTasks(own.client);
    const ids: string[] = [];
    for (let i = 0; i < 23; i++) {
      const task = await ownTasks.create("execute_python", { code: String(i) });
      await ownTasks.result(task.taskId);
      ids.push(task.taskId);
    }
    const first = await ownTasks.list();
    expect(first.tasks.length).toBe(20);
    expect(first.nextCursor).toBeDefined();
    const second = await ownTasks.list(first.nextCursor);
    expect(second.nextCursor).toBeUndefined();
    const listed = [...first.tasks, ...second.tasks];
    expect(listed.map((task) => task.taskId)).toEqual(ids);
    expect(new Set(listed.map((task) => task.status))).toEqual(new Set(["completed"]));
  } finally {
    await own.close();
  }
});

test("the ttl is honoured, and a task leaves with its run from the 64-run history", async () => {
  const brief = await startTask("execute_python", { code: "'brief'" }, 1);
  expect(brief.ttl).toBe(1);
  await taskResult(brief.taskId);
  await waitFor(
    async () => {
      try {
        await tasks.get(brief.taskId);
        return false;
      } catch (error) {
        return /Task not found/.test((error as Error).message);
      }
    },
    { what: "the 1 ms task to expire" },
  );
  // The run itself stays in the session's history.
  expect((await h.call("python_run", { run_id: brief.taskId })).structuredContent.value).toBe("brief");

  const kept = await startTask("execute_python", { code: "'kept'" });
  await taskResult(kept.taskId);
  for (let i = 0; i < 63; i++) await h.run("None");
  expect((await tasks.get(kept.taskId)).status).toBe("completed");
  await h.run("None");
  await expect(tasks.get(kept.taskId)).rejects.toThrow(/Task not found/);
});

test("a tool that is not an execution tool refuses task mode with a protocol error", async () => {
  await expect(
    h.server.client.request(
      { method: "tools/call", params: { name: "python_health", arguments: {}, task: {} } },
      CallToolResultSchema,
    ),
  ).rejects.toThrow(/does not run as a task/);
});
