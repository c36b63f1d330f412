// The MCP Inspector's CLI (a real third-party client) run against the binary, once per call: each run
// starts its own server in `dir`, with HOME and the cache inside it.
import { join } from "node:path";
import { BINARY } from "./harness.ts";
import { run } from "./run.ts";

const INSPECTOR = join(import.meta.dir, "../../node_modules/.bin/mcp-inspector");

export function runInspector(dir: string, ...args: string[]) {
  return run([INSPECTOR, "--cli", BINARY, ...args], {
    cwd: dir,
    env: { ...process.env, HOME: dir, XDG_CACHE_HOME: join(dir, ".cache") } as Record<string, string>,
  });
}
