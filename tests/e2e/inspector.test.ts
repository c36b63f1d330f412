// A real third-party client: the MCP Inspector's CLI lists the tools and runs one cell.
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { tempDir } from "../support/harness.ts";
import { runInspector } from "../support/inspector.ts";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function inspector(...args: string[]) {
  const { stdout, stderr, code } = await runInspector(dir, ...args);
  if (code !== 0) throw new Error(`inspector exited ${code}: ${stderr}`);
  return JSON.parse(stdout);
}

test("the inspector lists the tools", async () => {
  const listed = await inspector("--method", "tools/list");
  expect(listed.tools.map((tool: { name: string }) => tool.name)).toContain("execute_python");
});

test("the inspector runs a cell", async () => {
  const called = await inspector(
    "--method",
    "tools/call",
    "--tool-name",
    "execute_python",
    "--tool-arg",
    "code=6*7",
  );
  expect(called.isError).toBe(false);
  expect(called.structuredContent.value).toBe(42);
});
