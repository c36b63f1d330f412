// A run started as an MCP task that waits for the person's approval: under 2026-07-28 the task turns
// input_required with the form in tasks/get (checked against the tasks extension's own schema) and the
// client answers with tasks/update; under 2025-11-25 tasks/get says input_required and the form comes as
// an elicitation related to the task while the client waits on tasks/result. The peer's log says what was
// sent.
import { afterEach, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { GetTaskResultV2Schema } from "@modelcontextprotocol/ext-tasks/core/v2";
import { Harness, waitFor } from "../support/harness.ts";
import { LegacyTasks } from "../support/legacy-tasks.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";
import { envelope, RawServer } from "../support/raw.ts";

const TASKS = { extensions: { "io.modelcontextprotocol/tasks": {} } };
// Longer than the 1 s a 2026 call waits before it answers with the task.
const CELL = `import time\ntime.sleep(1.5)\n${createIssueCell("task")}`;

const calls = new PeerCalls();
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  calls.remove();
});

const received = () => calls.tools().length;
const registry = (project: string) =>
  writeFileSync(
    join(project, ".mcp.json"),
    JSON.stringify({ mcpServers: { typed: calls.entry({ approve: "writes" }) } }),
  );

test("2026-07-28: the task is input_required with the form; tasks/update answers it and the call goes once", async () => {
  const s = await RawServer.start({ era: "modern", beforeStart: registry });
  cleanups.push(() => s.close());
  s.meta = envelope({ ...TASKS, elicitation: { form: {} } });
  const sid = (await s.call("python_health", {})).result.structuredContent.server.session_id;
  const reply = await s.call("execute_python", { session_id: sid, code: CELL });
  expect(reply.result.resultType).toBe("task");
  const taskId = reply.result.taskId as string;
  let task: Record<string, any> = {};
  await waitFor(
    async () => {
      task = (await s.request("tasks/get", { taskId })).result;
      return task.status === "input_required";
    },
    { timeoutMs: 15_000, what: "the task to ask for input" },
  );
  expect(GetTaskResultV2Schema.safeParse(task).success).toBe(true);
  const [key, form] = Object.entries(task.inputRequests as Record<string, any>)[0] as [string, any];
  expect(form.method).toBe("elicitation/create");
  expect(form.params.message).toContain("typed.create_issue");
  expect(received()).toBe(0);
  const ack = await s.request("tasks/update", {
    taskId,
    inputResponses: { [key]: { action: "accept", content: { decision: "allow_once" } } },
  });
  expect(ack).toMatchObject({ result: { resultType: "complete" } });
  await waitFor(
    async () => {
      task = (await s.request("tasks/get", { taskId })).result;
      return task.status === "completed";
    },
    { timeoutMs: 15_000, what: "the task to complete" },
  );
  expect(task.result.structuredContent.value).toBe("sent");
  expect(received()).toBe(1);
}, 60_000);

test("2025-11-25: tasks/get says input_required; the form comes during tasks/result, related to the task", async () => {
  const forms: { message: string; meta: unknown }[] = [];
  const h = await Harness.start({
    beforeStart: registry,
    capabilities: { elicitation: { form: {} } },
    beforeConnect: (client) =>
      client.setRequestHandler("elicitation/create", async (request) => {
        const params = request.params as { message: string; _meta?: unknown };
        forms.push({ message: params.message, meta: params._meta });
        return { action: "accept", content: { decision: "deny" } } as never;
      }),
  });
  cleanups.push(() => h.close());
  const tasks = new LegacyTasks(h.client);
  const task = await tasks.create("execute_python", { code: CELL });
  await waitFor(async () => (await tasks.get(task.taskId)).status === "input_required", {
    timeoutMs: 15_000,
    what: "the task to ask for input",
  });
  // Nobody has been asked until the client waits on tasks/result.
  expect(forms).toHaveLength(0);
  const result = await tasks.result(task.taskId);
  expect(forms).toHaveLength(1);
  expect(forms[0]?.message).toContain("typed.create_issue");
  expect(forms[0]?.meta).toEqual({ "io.modelcontextprotocol/related-task": { taskId: task.taskId } });
  expect(result.structuredContent.value).toBe("APPROVAL_DENIED");
  expect(received()).toBe(0);
}, 60_000);
