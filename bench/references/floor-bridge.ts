// The floor bridge: the least a brokered MCP call can be, compiled by the benchmark with the product's
// flags. A cell in the eval loop calls `call(tool, arguments)`; the loop writes that as a line to this
// server, which hands it to the SDK's client connected to a stdio peer, and writes the result back. It
// crosses the process boundaries a cell's mcp.call crosses (worker → server → peer and back) with
// nothing else on the way: no registry, no checks, no journal.
//
//   floor-bridge --eval-loop PYTHON SCRIPT --peer COMMAND [ARGS...]
//
// It serves `execute_python` like the composed floor (bench/references/trivial-server.ts); the peer is
// started on the first call, as the broker starts its peers. It exits when its stdin ends, closing the
// peer and the eval loop first.
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { Server, type Tool } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { type CellCall, EvalLoop } from "./eval-loop-client.ts";

const [flag, python, script, peerFlag, peerCommand, ...peerArgs] = process.argv.slice(2);
if (flag !== "--eval-loop" || !python || !script || peerFlag !== "--peer" || !peerCommand) {
  process.stderr.write("usage: floor-bridge --eval-loop PYTHON SCRIPT --peer COMMAND [ARGS...]\n");
  process.exit(2);
}

let peer: Promise<Client> | undefined;

async function connectPeer(): Promise<Client> {
  const client = new Client({ name: "floor-bridge", version: "0.0.0" }, { capabilities: {} });
  await client.connect(
    new StdioClientTransport({ command: peerCommand as string, args: peerArgs, stderr: "ignore" }),
  );
  return client;
}

async function forward(request: CellCall): Promise<unknown> {
  peer ??= connectPeer();
  return (await peer).callTool({ name: request.call, arguments: request.arguments });
}

const evalLoop = new EvalLoop(python, script, forward);

const executePython: Tool = {
  name: "execute_python",
  description: "Runs Python in a persistent eval loop whose `call(tool, arguments)` reaches the peer.",
  inputSchema: { type: "object", properties: { code: { type: "string" } }, required: ["code"] },
};

function createServer(): Server {
  const server = new Server({ name: "floor-bridge", version: "0.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler("tools/list", async () => ({ tools: [executePython] }));
  server.setRequestHandler("tools/call", async (request) => {
    const { name, arguments: args } = request.params;
    if (name !== "execute_python") throw new Error(`unknown tool ${name}`);
    const reply = await evalLoop.run(String(args?.code ?? ""));
    if (reply.error !== undefined) return { content: [{ type: "text", text: reply.error }], isError: true };
    return { content: [{ type: "text", text: reply.value ?? "" }] };
  });
  return server;
}

process.stdin.on("end", async () => {
  evalLoop.stop();
  // The SDK's transport ends the peer's stdin and waits for it (killing it if it lingers).
  await (await peer?.catch(() => undefined))?.close();
  process.exit(0);
});

serveStdio(createServer);
