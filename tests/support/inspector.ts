// The MCP Inspector's CLI (a real third-party client) run against the binary, once per call: each run
// starts its own server in `dir`, with HOME and the cache inside it.
import { join } from "node:path";
import { BINARY } from "./harness.ts";

const INSPECTOR = join(import.meta.dir, "../../node_modules/.bin/mcp-inspector");

export async function runInspector(dir: string, ...args: string[]) {
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
  return { stdout, stderr, code };
}
