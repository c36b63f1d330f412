// The MCP conformance suite's client auth scenarios, run against the real binary through
// tests/conformance/auth-client.ts. Scenarios and single checks that do not apply are listed in
// tests/conformance/expected-failures.yml, which every run is given; the suite fails on any other failure
// and on a listed one that starts to pass.
import { expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { tempDir } from "../support/harness.ts";

const ROOT = resolve(import.meta.dir, "../..");
const CONFORMANCE = join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const ADAPTER = `${process.execPath} ${join(ROOT, "tests/conformance/auth-client.ts")}`;
const BASELINE = join(ROOT, "tests/conformance/expected-failures.yml");

async function conformance(args: string[]) {
  const out = tempDir("repl-mcp-conformance-out-");
  try {
    // The suite wants Node ≥ 22 (fs.globSync); the pinned Bun runs its JS entry fine.
    const proc = Bun.spawn(
      [
        process.execPath,
        CONFORMANCE,
        "client",
        "--command",
        ADAPTER,
        "--timeout",
        "120000",
        "-o",
        out,
        "--expected-failures",
        BASELINE,
        ...args,
      ],
      { cwd: out, stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } },
    );
    const [code, stdout, stderr] = await Promise.all([
      proc.exited,
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
    ]);
    return { code, stdout: stdout + stderr };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

test("client auth suite: every scenario that applies passes", async () => {
  const run = await conformance(["--suite", "auth"]);
  const summary = run.stdout.slice(run.stdout.indexOf("SUITE SUMMARY"));
  expect(summary).toContain("auth/metadata-default");
  expect(run.code, summary).toBe(0);
}, 300_000);

for (const scenario of [
  "auth/client-credentials-basic",
  "auth/2025-03-26-oauth-metadata-backcompat",
  "auth/2025-03-26-oauth-endpoint-fallback",
  "auth/resource-mismatch",
  "auth/offline-access-scope",
  "auth/offline-access-not-supported",
]) {
  test(`${scenario} (outside the default suite) passes`, async () => {
    const run = await conformance(["--scenario", scenario]);
    expect(run.stdout).toMatch(/Passed: \d+\/\d+/);
    expect(run.stdout).toContain("Baseline check passed");
    expect(run.code, run.stdout.slice(run.stdout.indexOf("Test Results"))).toBe(0);
  }, 120_000);
}
