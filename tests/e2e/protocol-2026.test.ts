// MCP 2026-07-28 over stdio, message by message: no handshake, the per-request envelope, resultType and
// the cache fields, -32022 for a revision we do not serve, the session_id rules (A3, A5), progress that
// ends with the response, and long cells as tasks of the io.modelcontextprotocol/tasks extension.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  CancelTaskResultV2Schema,
  CreateTaskResultV2Schema,
  GetTaskResultV2Schema,
  hasTaskServerCapabilityV2,
} from "@modelcontextprotocol/ext-tasks/core/v2";
import { waitFor } from "../support/harness.ts";
import { envelope, RawServer } from "../support/raw.ts";

const TASKS = { extensions: { "io.modelcontextprotocol/tasks": {} } };
const A3 = "Pass session_id from python_health or python_session_open to reference persistent state";

let s: RawServer;
let sessionId: string;
beforeAll(async () => {
  s = await RawServer.start({ era: "modern" });
  const health = await s.call("python_health", {});
  sessionId = health.result.structuredContent.server.session_id;
});
afterAll(async () => {
  await s.close();
});

/** Checks a result against the tasks extension's own wire schema (its package's, not ours). */
function conforms(
  schema: { safeParse(value: unknown): { success: boolean; error?: unknown } },
  value: unknown,
) {
  const parsed = schema.safeParse(value);
  expect(parsed.error).toBeUndefined();
  expect(parsed.success).toBe(true);
}

/** A cell in the default session, with the session id a 2026 client must pass. */
function cell(code: string, extra: Record<string, unknown> = {}, meta: Record<string, unknown> = {}) {
  return s.request("tools/call", {
    name: "execute_python",
    arguments: { code, session_id: sessionId, ...extra },
    _meta: meta,
  });
}

describe("the stateless handshake", () => {
  test("server/discover names the revision, the capabilities and the tasks extension", async () => {
    const reply = await s.request("server/discover", {});
    const result = reply.result;
    expect(result.supportedVersions).toEqual(["2026-07-28"]);
    expect(result.capabilities.tools).toBeDefined();
    expect(result.capabilities.extensions).toEqual({ "io.modelcontextprotocol/tasks": {} });
    expect(hasTaskServerCapabilityV2(result.capabilities)).toBe(true);
    expect(result.capabilities.tasks).toBeUndefined();
    expect(result.resultType).toBe("complete");
    expect(result._meta["io.modelcontextprotocol/serverInfo"].name).toBe("repl-mcp");
    expect(result.instructions).toContain("session_id");
  });

  test("tools/list carries resultType, ttlMs 0 and cacheScope private, and no 2025 task fields", async () => {
    const { result } = await s.request("tools/list", {});
    expect(result).toMatchObject({ resultType: "complete", ttlMs: 0, cacheScope: "private" });
    expect(result.tools).toHaveLength(15);
    for (const tool of result.tools) expect(tool.execution).toBeUndefined();
  });

  test("a revision we do not serve is -32022 with the supported list, nothing served", async () => {
    const reply = await s.request("tools/list", { _meta: envelope({}, "2027-01-01") });
    expect(reply.error.code).toBe(-32022);
    expect(reply.error.data).toMatchObject({ supported: ["2026-07-28"], requested: "2027-01-01" });
    expect(reply.result).toBeUndefined();
  });

  test("a request without the envelope is refused on a 2026-07-28 connection", async () => {
    const id = 90_001;
    s.send({ jsonrpc: "2.0", id, method: "tools/list", params: {} });
    const reply = await s.waitMessage((message) => message.id === id);
    expect(reply.error.code).toBe(-32602);
    expect(reply.error.message).toContain("_meta envelope");
  });

  test("an unknown revision in the very first message is refused too", async () => {
    const other = await RawServer.start({ era: "modern" });
    try {
      const reply = await other.request("server/discover", { _meta: envelope({}, "2030-01-01") });
      expect(reply.error.code).toBe(-32022);
      expect(reply.error.data.supported).toEqual(["2026-07-28"]);
      // The connection stays open for a revision we serve.
      expect((await other.request("server/discover", {})).result.supportedVersions).toEqual(["2026-07-28"]);
    } finally {
      await other.close();
    }
  });
});

describe("sessions without a transport session", () => {
  test("execute_python and python_start without session_id fail with A3 before anything runs", async () => {
    const fresh = await RawServer.start({ era: "modern" });
    try {
      const marker = join(fresh.project, "ran");
      const code = `open(${JSON.stringify(marker)}, 'w').write('x')`;
      for (const name of ["execute_python", "python_start"]) {
        const reply = await fresh.call(name, { code });
        expect(reply.error).toEqual({ code: -32602, message: A3 });
      }
      expect(existsSync(marker)).toBe(false);
      const health = (await fresh.call("python_health", {})).result.structuredContent;
      expect(health.server.generation).toBe(0);
      expect(health.server.python).toBeNull();
      // Bad arguments are still reported as such first.
      expect((await fresh.call("execute_python", { code: 1 })).error.message).toBe(
        "Invalid arguments at /code",
      );
    } finally {
      await fresh.close();
    }
  });

  test("python_health's server.session_id works; variables persist; a foreign id is A5", async () => {
    expect((await cell("x = 41")).result.isError).toBe(false);
    expect((await cell("x + 1")).result.structuredContent.value).toBe(42);
    const foreign = await s.call("execute_python", { code: "1", session_id: crypto.randomUUID() });
    expect(foreign.error).toEqual({
      code: -32602,
      message: "Session not found or closed; open a new session",
    });
    // Tools other than execute_python/python_start still default to the default session.
    const run = await s.call("python_run", {});
    expect(run.result.structuredContent.session_id).toBe(sessionId);
  });

  test("a session opened under 2026 is addressed by its id", async () => {
    const opened = await s.call("python_session_open", { name: "second", project: s.project });
    const second = opened.result.structuredContent.session_id;
    const reply = await s.call("execute_python", { code: "y = 'two'\ny", session_id: second });
    expect(reply.result.structuredContent.value).toBe("two");
    expect((await cell("'y' in globals()")).result.structuredContent.value).toBe(false);
    await s.call("python_session_close", { session_id: second });
  });
});

describe("progress", () => {
  test("_meta.progressToken gives progress notifications, and none after the response", async () => {
    const token = "p-2026";
    const reply = await cell(
      "import time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.5)",
      {},
      {
        progressToken: token,
      },
    );
    const index = s.messages.indexOf(reply);
    const progress = s.messages.filter(
      (m) => m.method === "notifications/progress" && m.params.progressToken === token,
    );
    expect(progress.length).toBeGreaterThanOrEqual(2);
    for (const m of progress) expect(s.messages.indexOf(m)).toBeLessThan(index);
    // Give a stray late notification every chance to show up.
    await cell("1");
    const after = s.messages.slice(index + 1).filter((m) => m.params?.progressToken === token);
    expect(after).toEqual([]);
  });
});

describe("long cells as tasks (io.modelcontextprotocol/tasks)", () => {
  test("a client that does not take tasks always gets the result itself", async () => {
    const reply = await cell("import time\ntime.sleep(1.5)\n'plain'");
    expect(reply.result.resultType).toBe("complete");
    expect(reply.result.structuredContent.value).toBe("plain");
  });

  test("with the extension a short cell still answers inline", async () => {
    const reply = await cell("6 * 7", {}, envelope(TASKS));
    expect(reply.result.resultType).toBe("complete");
    expect(reply.result.structuredContent.value).toBe(42);
  });

  test("a long cell becomes a task: working, then completed with the result inline", async () => {
    const reply = await cell(
      "import time\nprint('started', flush=True)\ntime.sleep(4)\n'late'",
      {},
      envelope(TASKS),
    );
    const task = reply.result;
    conforms(CreateTaskResultV2Schema, task);
    expect(task).toMatchObject({ resultType: "task", status: "working", ttlMs: expect.any(Number) });
    expect(task.pollIntervalMs).toBeGreaterThan(0);
    const working = (await s.request("tasks/get", { taskId: task.taskId })).result;
    conforms(GetTaskResultV2Schema, working);
    expect(working).toMatchObject({ resultType: "complete", taskId: task.taskId, status: "working" });
    expect(working.result).toBeUndefined();
    let done: Record<string, any> = working;
    await waitFor(
      async () => {
        done = (await s.request("tasks/get", { taskId: task.taskId })).result;
        return done.status !== "working";
      },
      { timeoutMs: 20_000, what: "the task to finish" },
    );
    expect(done.status).toBe("completed");
    conforms(GetTaskResultV2Schema, done);
    expect(done.result.structuredContent).toMatchObject({
      run_id: task.taskId,
      value: "late",
      success: true,
    });
    expect(done.result.content[0].text).toContain("started");
    // The task id is the run id: python_run sees the same run.
    const run = (await s.call("python_run", { run_id: task.taskId })).result.structuredContent;
    expect(run).toMatchObject({ run_id: task.taskId, success: true, value: "late" });
  });

  test("a failed cell completes as a tool result with isError", async () => {
    const reply = await cell("import time\ntime.sleep(1.5)\nraise ValueError('nope')", {}, envelope(TASKS));
    const taskId = reply.result.taskId;
    let done: Record<string, any> = {};
    await waitFor(
      async () => {
        done = (await s.request("tasks/get", { taskId })).result;
        return done.status !== "working";
      },
      { timeoutMs: 20_000, what: "the task to finish" },
    );
    expect(done.status).toBe("completed");
    expect(done.result.isError).toBe(true);
    expect(done.result.structuredContent.error).toContain("ValueError: nope");
  });

  test("tasks/cancel stops the run with no late effect; python_run reports it cancelled", async () => {
    const marker = join(s.project, "late-effect");
    const code = `import time\ntime.sleep(3)\nopen(${JSON.stringify(marker)}, 'w').write('late')`;
    const reply = await cell(code, {}, envelope(TASKS));
    const taskId = reply.result.taskId;
    const ack = await s.request("tasks/cancel", { taskId });
    expect(ack.result).toMatchObject({ resultType: "complete" });
    conforms(CancelTaskResultV2Schema, ack.result);
    await waitFor(async () => (await s.request("tasks/get", { taskId })).result.status === "cancelled", {
      timeoutMs: 10_000,
      what: "the task to be cancelled",
    });
    const run = (await s.call("python_run", { run_id: taskId })).result.structuredContent;
    expect(run).toMatchObject({ run_id: taskId, success: false, error: "Execution cancelled" });
    await Bun.sleep(3_500); // past the cell's own sleep: the write must never happen
    expect(existsSync(marker)).toBe(false);
    // The session is usable again.
    expect((await cell("'after'")).result.structuredContent.value).toBe("after");
  });

  test("a cell sent while a task is being cancelled waits for the slot, as a plain call does", async () => {
    // The cell takes a second to give up after the interrupt: the slot is still held when the next comes.
    const stubborn =
      "import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    time.sleep(1)\n    raise";
    const reply = await cell(stubborn, {}, envelope(TASKS));
    expect(reply.result.resultType).toBe("task");
    await s.request("tasks/cancel", { taskId: reply.result.taskId });
    const next = await cell("'next'", {}, envelope(TASKS));
    expect(next.result.structuredContent).toMatchObject({ success: true, value: "next" });
  });

  test("python_cancel on a task's run id cancels the task", async () => {
    const reply = await cell("import time\ntime.sleep(30)", {}, envelope(TASKS));
    const taskId = reply.result.taskId;
    const cancel = await s.call("python_cancel", { run_id: taskId });
    expect(cancel.result.structuredContent.cancel_requested).toBe(true);
    await waitFor(async () => (await s.request("tasks/get", { taskId })).result.status === "cancelled", {
      timeoutMs: 10_000,
      what: "the task to be cancelled",
    });
  });

  test("an unknown task id is a protocol error; tasks/update with answers to nothing changes nothing", async () => {
    const unknown = await s.request("tasks/get", { taskId: "no-such-task" });
    expect(unknown.error.code).toBe(-32602);
    const reply = await cell("import time\ntime.sleep(1.5)\n'slept'", {}, envelope(TASKS));
    const update = await s.request("tasks/update", {
      taskId: reply.result.taskId,
      inputResponses: { "no-such-question": { action: "accept", content: { decision: "allow_once" } } },
    });
    expect(update.result).toMatchObject({ resultType: "complete" });
    await waitFor(
      async () =>
        (await s.request("tasks/get", { taskId: reply.result.taskId })).result.status === "completed",
      {
        timeoutMs: 10_000,
        what: "the task to complete",
      },
    );
    const missing = await s.request("tasks/update", { taskId: "no-such-task", inputResponses: {} });
    expect(missing.error.code).toBe(-32602);
  });
});
