// The MCP surface: initialize, the tool catalogue, the error model and python_health.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { Harness } from "../support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

async function protocolError(name: string, args: Record<string, unknown>) {
  try {
    await h.call(name, args);
  } catch (error) {
    return error as { code: number; message: string };
  }
  throw new Error(`${name} did not fail at the protocol level: ${JSON.stringify(args)}`);
}

function expectProtocolError(error: { code: number; message: string }, text: string): void {
  expect(error.code).toBe(-32602);
  expect(error.message).toContain(text);
}

describe("initialize and tools/list", () => {
  test("serverInfo and instructions", () => {
    expect(h.client.getServerVersion()).toEqual({ name: "repl-mcp", version: pkg.version });
    expect(h.client.getInstructions()).toContain("not a sandbox");
    expect(h.client.getServerCapabilities()?.tools).toBeDefined();
  });

  test("lists working tools with strict input schemas, output schemas, annotations and cache hints", async () => {
    const listed = (await h.client.listTools()) as Record<string, unknown> & { tools: any[] };
    expect(listed.ttlMs).toBe(0);
    expect(listed.cacheScope).toBe("private");
    const names = listed.tools.map((tool) => tool.name).sort();
    expect(names).toEqual([
      "artifact_create",
      "artifact_delete",
      "artifact_forward",
      "artifact_read",
      "artifact_save",
      "execute_python",
      "python_cancel",
      "python_execute_file",
      "python_health",
      "python_run",
      "python_session_close",
      "python_session_inspect",
      "python_session_list",
      "python_session_open",
      "python_start",
    ]);
    for (const tool of listed.tools) {
      expect(tool.inputSchema.additionalProperties).toBe(false);
      expect(tool.outputSchema.type).toBe("object");
      expect(typeof tool.annotations.readOnlyHint).toBe("boolean");
      expect(tool.description.length).toBeGreaterThan(40);
    }
    const execute = listed.tools.find((tool) => tool.name === "execute_python");
    // Agents should learn about the broker from the first lines of the description.
    expect(execute.description.slice(0, 400)).toContain("mcp");
    expect(execute.inputSchema.required).toEqual(["code"]);
    expect(execute.inputSchema.properties.code.maxLength).toBe(262_144);
    expect(execute.inputSchema.properties.timeout).toMatchObject({
      minimum: 0.01,
      maximum: 3600,
      default: 120,
    });
    expect(execute.outputSchema.required).toEqual(
      expect.arrayContaining(["run_id", "success", "stdout", "stderr", "error", "state", "truncated"]),
    );
    expect(execute.annotations).toEqual({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
    });
  });
});

describe("error model", () => {
  test("missing, mistyped, out-of-range and unknown arguments are -32602 with a JSON pointer", async () => {
    expect(await protocolError("execute_python", {})).toMatchObject({
      code: -32602,
      message: expect.stringContaining("Invalid arguments at /code"),
    });
    expect((await protocolError("execute_python", { code: 1 })).message).toContain(
      "Invalid arguments at /code",
    );
    expect((await protocolError("execute_python", { code: "1", timeout: 0 })).message).toContain(
      "Invalid arguments at /timeout",
    );
    expect((await protocolError("execute_python", { code: "1", timeout: 3601 })).message).toContain(
      "Invalid arguments at /timeout",
    );
    expect((await protocolError("execute_python", { code: "1", bogus: true })).message).toContain(
      "Invalid arguments at /bogus",
    );
    expect((await protocolError("python_health", { extra: 1 })).message).toContain(
      "Invalid arguments at /extra",
    );
  });

  test("python_session_open without project: -32602 that says project is required and what else to pass", async () => {
    // The schema lists only name as required (project is optional with kernel_server): the error and the
    // description must say it, or a model reading the schema cannot tell why the call failed.
    const error = await protocolError("python_session_open", { name: "no-project" });
    expectProtocolError(error, "Invalid arguments at /project: project is required for a local session");
    expect(error.message).toContain("kernel_server");
    const { tools } = await h.client.listTools();
    const open = tools.find((tool) => tool.name === "python_session_open");
    expect(open?.inputSchema.required).toEqual(["name"]);
    expect(open?.description).toContain("project is required for a local session");
  });

  test("a non-integral expected_generation is a protocol error", async () => {
    const error = await protocolError("execute_python", { code: "1", expected_generation: 1.5 });
    expect(error.code).toBe(-32602);
    expect(error.message).toContain("expected_generation must be a nonnegative integral u64");
  });

  test("u64 fields: a whole number past the field's bound is a schema error, a non-u64 its own error", async () => {
    writeFileSync(join(h.project, "ten.txt"), "0123456789");
    const session_id = (await h.health()).server.session_id;
    const ref = (await h.call("artifact_create", { session_id, path: "ten.txt", format: "text" }))
      .structuredContent;
    const read = (args: Record<string, unknown>) =>
      h.call("artifact_read", { session_id, id: ref.id, ...args });
    const u64 = (key: string) => `${key} must be a nonnegative integral u64`;
    const largestBelow2To64 = 2 ** 64 - 2048;

    // length: 0..65536 is the schema's bound; whole numbers past it name the field like any bound.
    expect((await read({ length: 65_536 })).structuredContent).toMatchObject({ length: 10, has_more: false });
    for (const length of [65_537, 2 ** 53, largestBelow2To64]) {
      const error = await protocolError("artifact_read", { session_id, id: ref.id, length });
      expectProtocolError(error, "Invalid arguments at /length");
      expect(error.message).not.toContain("u64");
    }
    expect(
      (await protocolError("artifact_read", { session_id, id: ref.id, length: "10" })).message,
    ).toContain("Invalid arguments at /length");
    for (const length of [-1, 1.5, 2 ** 64, 1e300]) {
      const error = await protocolError("artifact_read", { session_id, id: ref.id, length });
      expectProtocolError(error, u64("length"));
    }

    // offset: no schema maximum, so every u64 reaches the artifact and is checked against its size.
    expect((await read({ offset: 10 })).structuredContent).toMatchObject({ length: 0, has_more: false });
    for (const offset of [11, 2 ** 53, largestBelow2To64]) {
      const result = await read({ offset });
      expect(result.isError).toBe(true);
      expect(result.structuredContent.error).toContain("Artifact range must fit file");
    }
    for (const offset of [-1, 0.5, 2 ** 64]) {
      const error = await protocolError("artifact_read", { session_id, id: ref.id, offset });
      expectProtocolError(error, u64("offset"));
    }

    // expected_generation: every u64 is a generation to compare with; only non-u64 values are refused.
    for (const expected_generation of [1, largestBelow2To64]) {
      const result = (await h.call("execute_python", { code: "1", expected_generation })).structuredContent;
      expect(result).toMatchObject({ success: false, error_code: "STATE_CHANGED" });
    }
    for (const expected_generation of [-1, 2 ** 64]) {
      const error = await protocolError("execute_python", { code: "1", expected_generation });
      expectProtocolError(error, u64("expected_generation"));
    }
    // An unknown argument that happens to share a u64 field's name is just an unknown argument.
    expect((await protocolError("python_health", { offset: 1.5 })).message).toContain(
      "Invalid arguments at /offset",
    );
  });

  test("an unknown tool and an unknown session are protocol errors", async () => {
    expect(await protocolError("no_such_tool", {})).toMatchObject({
      code: -32602,
      message: expect.stringContaining("Unknown tool"),
    });
    expect((await protocolError("execute_python", { code: "1", session_id: "nope" })).message).toContain(
      "Session not found or closed; open a new session",
    );
  });
});

describe("python_health", () => {
  test("answers without starting Python, then reports the worker once one ran", async () => {
    const health = await h.health();
    expect(health.server.runtime).toBe("bun-supervisor/cpython-worker");
    expect(health.server.version).toBe(pkg.version);
    expect(health.server.python).toBeNull();
    expect(health.server.generation).toBe(0);
    expect(health.server.project).toBe(h.project);
    expect(health.server.python_executable).toMatch(/python/);
    expect(health.server.limits).toMatchObject({
      code_bytes: 262_144,
      frame_bytes: 1_048_576,
      worker_rss_mib: 2048,
    });
    expect(health.server.session_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(health.broker).toBeDefined();
    expect(health.sessions.sessions).toHaveLength(1);
    expect(h.children()).toEqual([]);

    const cell = await h.run("import os, sys\n[os.getpid(), sys.executable]", {
      session_id: health.server.session_id,
    });
    const after = await h.health();
    expect(after.server.generation).toBe(1);
    expect(after.server.python.pid).toBe(cell.value[0]);
    expect(after.server.python.python_executable).toBe(cell.value[1]);
    expect(after.server.python.running).toBe(true);
    expect(after.server.python.python_version).toMatch(/^3\.\d+\.\d+/);
    expect(h.children().length).toBe(2); // the guardian and the worker
  });
});
