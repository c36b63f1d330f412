// The command line and the binary's independence from the directory it runs in.
import { afterEach, expect, test } from "bun:test";
import { copyFileSync, existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { BINARY, Harness, tempDir } from "../support/harness.ts";
import { run } from "../support/run.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function runBinary(args: string[], cwd?: string) {
  return run([BINARY, ...args], { cwd, timeoutMs: 30_000 });
}

test("--version prints the package version", async () => {
  const { stdout, code } = await runBinary(["--version"]);
  expect(code).toBe(0);
  expect(stdout.trim()).toBe(pkg.version);
});

test("--help describes the flags and hides the guardian mode", async () => {
  const { stdout, code } = await runBinary(["--help"]);
  expect(code).toBe(0);
  for (const flag of ["--transport", "--python", "--max-memory-mib", "--log-level"])
    expect(stdout).toContain(flag);
  expect(stdout).not.toContain("guardian");
});

test("an unknown flag or a bad value is a usage error with exit status 2", async () => {
  const unknown = await runBinary(["--frobnicate"]);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain("unknown option --frobnicate");
  const transport = await runBinary(["--transport", "sse"]);
  expect(transport.code).toBe(2);
  expect(transport.stderr).toContain("--transport must be stdio");
  const memory = await runBinary(["--max-memory-mib", "lots"]);
  expect(memory.code).toBe(2);
  expect(memory.stderr).toContain("--max-memory-mib takes a whole number");
});

test("a copy of the binary runs anywhere and ignores .env and bunfig.toml in its directory", async () => {
  const dir = tempDir();
  dirs.push(dir);
  const copy = join(dir, "repl-mcp");
  copyFileSync(BINARY, copy);
  const marker = join(dir, "preloaded");
  writeFileSync(join(dir, ".env"), "REPL_MCP_DOTENV_PROBE=loaded\n");
  writeFileSync(
    join(dir, "preload.ts"),
    `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "x");\n`,
  );
  writeFileSync(join(dir, "bunfig.toml"), 'preload = ["./preload.ts"]\n');
  const h = await Harness.start({ cwd: dir, env: {} });
  try {
    const result = await h.run("import os\nos.environ.get('REPL_MCP_DOTENV_PROBE')");
    expect(result.success).toBe(true);
    expect(result.value).toBeUndefined();
    expect(result.return_value).toBeNull();
    expect(existsSync(marker)).toBe(false);
  } finally {
    await h.close();
  }
});

test("--python selects the interpreter and health reports it", async () => {
  const python = Bun.which("python3") as string;
  const h = await Harness.start({ args: ["--python", python, "--max-memory-mib", "512"] });
  try {
    const health = await h.health();
    expect(health.server.python_executable).toBe(python);
    expect(health.server.limits.worker_rss_mib).toBe(512);
  } finally {
    await h.close();
  }
});

test("a --python that does not exist fails the cell with an actionable message, not the server", async () => {
  const h = await Harness.start({ args: ["--python", "/nonexistent/python3"] });
  try {
    const result = await h.call("execute_python", { code: "1" });
    expect(result.isError).toBe(true);
    expect(result.structuredContent.error).toContain("/nonexistent/python3");
    expect(result.structuredContent.state).toBe("cleared");
    expect((await h.health()).server.environment.error).toContain("/nonexistent/python3");
  } finally {
    await h.close();
  }
});
