// A real third-party client: the MCP Inspector's CLI lists the tools and runs one cell.
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { BINARY, tempDir } from "../support/harness.ts";

const INSPECTOR = join(import.meta.dir, "../../node_modules/.bin/mcp-inspector");
const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function inspector(...args: string[]) {
  const proc = Bun.spawn([INSPECTOR, "--cli", BINARY, ...args], {
    cwd: dir,
    env: { ...process.env, HOME: dir, XDG_CACHE_HOME: join(dir, ".cache") },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
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
