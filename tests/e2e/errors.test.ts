// Every isError result carries a stable error_code next to its message, and every result (success or
// failure) matches the tool's published outputSchema: the client validates each one against the schema
// once it has listed the tools.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { Harness, waitFor } from "../support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
  // Listing makes the SDK client check every later structuredContent against the published schemas.
  await h.client.listTools();
});
afterAll(async () => {
  await h.close();
});

async function failure(tool: string, args: Record<string, unknown> = {}) {
  const result = await h.call(tool, args);
  expect(result.isError).toBe(true);
  expect(typeof result.structuredContent.error).toBe("string");
  return result.structuredContent;
}

test("published output schemas of success-or-failure tools are oneOf unions", async () => {
  const { tools } = await h.client.listTools();
  const schema = (name: string) => tools.find((tool) => tool.name === name)?.outputSchema as any;
  for (const name of ["python_start", "python_run", "python_cancel", "python_session_open"]) {
    expect(schema(name).type).toBe("object");
    expect(schema(name).oneOf.length).toBeGreaterThanOrEqual(2);
  }
  const start = schema("python_start");
  expect(start.oneOf[0].required).toEqual(expect.arrayContaining(["run_id", "session_id", "status"]));
  expect(start.oneOf[1].required).toEqual(expect.arrayContaining(["error", "error_code"]));
  expect(schema("execute_python").properties.error_code).toBeDefined();
  expect(schema("python_health").required).toEqual(expect.arrayContaining(["server", "broker"]));
});

test("execution failures carry their codes; successes carry error_code null", async () => {
  const ok = await h.run("1 + 1");
  expect(ok).toMatchObject({ success: true, error: null, error_code: null });

  expect(await h.run("raise ValueError('boom')")).toMatchObject({
    success: false,
    error_code: "PYTHON_EXCEPTION",
  });
  expect(await h.run("1", { expected_generation: 999 })).toMatchObject({ error_code: "STATE_CHANGED" });
  expect(await h.run("import time\ntime.sleep(5)", { timeout: 0.2 })).toMatchObject({
    error_code: "TIMEOUT",
  });
  const file = await h.call("python_execute_file", {
    session_id: (await h.health()).server.session_id,
    path: join(h.project, "missing.py"),
  });
  expect(file.isError).toBe(true);
  expect(file.structuredContent.error_code).toBe("FILE_NOT_FOUND");
});

test("a busy session, a missing run and nothing to cancel each have their code", async () => {
  const started = await h.call("python_start", { code: "import time\ntime.sleep(30)" });
  expect(started.isError).toBe(false);
  const busy = await failure("python_start", { code: "1" });
  expect(busy.error_code).toBe("SESSION_BUSY");
  expect((await h.run("1")).error_code).toBe("SESSION_BUSY");

  const cancelled = await h.call("python_cancel", {});
  expect(cancelled.structuredContent.cancel_requested).toBe(true);
  let final: Record<string, any> = {};
  await waitFor(
    async () => {
      final = (await h.call("python_run", { run_id: started.structuredContent.run_id })).structuredContent;
      return "success" in final;
    },
    { timeoutMs: 15_000, what: "the cancelled run to finish" },
  );
  expect(final).toMatchObject({ success: false, error_code: "CANCELLED" });

  expect((await failure("python_cancel")).error_code).toBe("NO_ACTIVE_RUN");
  expect((await failure("python_run", { run_id: "no-such-run" })).error_code).toBe("RUN_NOT_FOUND");
});

test("session tools report their failures with codes", async () => {
  const missing = await failure("python_session_open", { name: "x", project: join(h.dir, "nowhere") });
  expect(missing.error_code).toBe("PROJECT_INVALID");
  const python = await failure("python_session_open", {
    name: "x",
    project: h.project,
    python: join(h.dir, "no-python"),
  });
  expect(python.error_code).toBe("PYTHON_NOT_FOUND");
  // 70 characters but 140 bytes: within the schema's length, over the byte limit → a tool result.
  const wide = await failure("python_session_open", { name: "é".repeat(70), project: h.project });
  expect(wide).toMatchObject({
    error: "Session name must contain 1..128 bytes",
    error_code: "LIMIT_EXCEEDED",
  });
  const server = (await h.health()).server;
  const closing = await failure("python_session_close", { session_id: server.session_id });
  expect(closing.error_code).toBe("DEFAULT_SESSION");
  const unknown = await failure("python_session_close", { session_id: "no-such-session" });
  expect(unknown.error_code).toBe("SESSION_NOT_FOUND");
});
