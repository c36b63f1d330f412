// Reference server for the benchmark, compiled by bench/run.ts into a temp dir with the same flags as
// release/build.ts. It is the smallest MCP server the SDK allows, served over stdio the way the product
// is: the low-level Server behind the SDK's `serveStdio` entry (both protocol eras, the SDK's own stdio
// transport), one tool that does nothing.
//
//   trivial-server                               the MCP floor: only `noop`
//   trivial-server --eval-loop PYTHON SCRIPT     the composed floor: also `execute_python`, which forwards
//                                                the code to SCRIPT (bench/references/eval-loop.py) run by
//                                                PYTHON, spawned directly on the first call (no guardian)
//
// It exits when its stdin ends, killing the eval loop first, so the benchmark never leaves it behind.
import { Server, type Tool } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { EvalLoop } from "./eval-loop-client.ts";

const argv = process.argv.slice(2);
let evalLoop: EvalLoop | undefined;
if (argv[0] === "--eval-loop") {
  const [, python, script] = argv;
  if (!python || !script) {
    process.stderr.write("usage: trivial-server [--eval-loop PYTHON SCRIPT]\n");
    process.exit(2);
  }
  evalLoop = new EvalLoop(python, script);
}

const noop: Tool = {
  name: "noop",
  description: "Does nothing.",
  inputSchema: { type: "object", properties: {} },
};
const executePython: Tool = {
  name: "execute_python",
  description: "Runs Python in a persistent eval loop.",
  inputSchema: { type: "object", properties: { code: { type: "string" } }, required: ["code"] },
};
const tools = evalLoop ? [noop, executePython] : [noop];

function createServer(): Server {
  const server = new Server({ name: "trivial-server", version: "0.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler("tools/list", async () => ({ tools }));
  server.setRequestHandler("tools/call", async (request) => {
    const { name, arguments: args } = request.params;
    if (name === "noop") return { content: [{ type: "text", text: "ok" }] };
    if (name === "execute_python" && evalLoop) {
      const reply = await evalLoop.run(String(args?.code ?? ""));
      if (reply.error !== undefined) return { content: [{ type: "text", text: reply.error }], isError: true };
      return { content: [{ type: "text", text: reply.value ?? "" }] };
    }
    throw new Error(`unknown tool ${name}`);
  });
  return server;
}

process.stdin.on("end", () => {
  evalLoop?.stop();
  process.exit(0);
});

serveStdio(createServer);
