// Part of `npm run bench`: how much smaller the Python stubs of mcp.<server>.source() are than the JSON
// tool definitions they are built from (bytes of the stub text / bytes of the compact JSON of the
// granted definitions, as mcp.list_tools returns them), for server-memory from npm and the typed
// fixture peer (twenty tools with nested schemas). Sizes, not timings: the figures are exact.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { stopAll, textOf, withServer } from "./lib/mcp.ts";
import { cleanEnv } from "./lib/spawn.ts";
import { table } from "./lib/table.ts";

const root = resolve(import.meta.dir, "..");
const binary = resolve(process.env.REPL_MCP_BINARY ?? join(root, "dist/repl-mcp"));
/** The bound: a stub at most a third the size of the definitions. */
const MAX_RATIO = 1 / 3;

const project = mkdtempSync(join(tmpdir(), "repl-mcp-bench-stubs-"));
const servers = {
  memory: {
    command: "node",
    args: [join(root, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")],
    env: { MEMORY_FILE_PATH: join(project, "memory.json") },
  },
  typed: { command: process.execPath, args: [join(root, "tests/fixtures/peers/typed-peer.ts"), "stdio"] },
};
writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: servers }));

const code = [
  "import json",
  "out = {}",
  "for name in sorted(mcp.servers()):",
  "    definitions = json.dumps(mcp.list_tools(name), separators=(',', ':'))",
  "    out[name] = [len(mcp[name].source().encode()), len(definitions.encode()), len(mcp.list_tools(name))]",
  "print(json.dumps(out))",
].join("\n");

try {
  const sizes = await withServer(
    { label: "repl-mcp", command: binary, args: [], env: cleanEnv(), cwd: project },
    async (served) => {
      const result = await served.call("execute_python", { code, timeout: 120 });
      const structured = result.structuredContent as { success: boolean; stdout: string; error: unknown };
      if (!structured.success) throw new Error(`the cell failed: ${textOf(result)}`);
      return JSON.parse(structured.stdout) as Record<string, [number, number, number]>;
    },
  );
  const rows = Object.entries(sizes).map(([name, [stub, json, tools]]) => [
    name,
    String(tools),
    stub.toLocaleString("en"),
    json.toLocaleString("en"),
    (stub / json).toFixed(3),
    stub / json <= MAX_RATIO ? "yes" : "NO",
  ]);
  console.log("\nmcp.<server>.source() stubs against the JSON tool definitions\n");
  console.log(table(["server", "tools", "stub bytes", "JSON bytes", "ratio", "≤ 1/3"], rows));
  if (Object.values(sizes).some(([stub, json]) => stub / json > MAX_RATIO)) process.exitCode = 1;
} finally {
  await stopAll();
  rmSync(project, { recursive: true, force: true });
}
