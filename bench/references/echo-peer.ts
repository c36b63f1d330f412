// The stdio MCP peer of the brokered-call measurements: the SDK's Server on its stdio transport (legacy
// handshake, as every contender's client speaks) with an `echo` tool. Every contender (the product's
// mcp.call, the 1.x product's, the floor bridge's, and the SDK client calling it directly) gets its own
// copy of this same program. Run with bun: `bun bench/references/echo-peer.ts`.
//
// It notes when each `echo` request arrived (parsed by its transport) and when its response left (handed
// to the transport), in CLOCK_MONOTONIC nanoseconds, the clock Python's time.monotonic_ns() reads, so a
// cell's own timestamps and the peer's line up. The `stamps` tool returns them and starts over.
import { dlopen, FFIType, ptr } from "bun:ffi";
import { Server, type Tool } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";

// Bun's own clocks count from the process's start; clock_gettime gives the one shared by every process.
const CLOCK_MONOTONIC = 1;
const libc = dlopen("libc.so.6", {
  clock_gettime: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
});
const timespec = new BigInt64Array(2);
const timespecAddress = ptr(timespec);
function monotonicNs(): number {
  libc.symbols.clock_gettime(CLOCK_MONOTONIC, timespecAddress);
  return Number(timespec[0]) * 1e9 + Number(timespec[1]);
}

const tools: Tool[] = [
  {
    name: "echo",
    description: "Returns its text.",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  },
  {
    name: "stamps",
    description: "Arrival and departure times of the echo calls since the last stamps call.",
    inputSchema: { type: "object", properties: {} },
  },
];

let arrived: number[] = [];
let left: number[] = [];
const echoes = new Set<string | number>();

const server = new Server({ name: "echo-peer", version: "0.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler("tools/list", async () => ({ tools }));
server.setRequestHandler("tools/call", async (request) => {
  const { name, arguments: args } = request.params;
  if (name === "echo") return { content: [{ type: "text", text: String(args?.text ?? "") }] };
  if (name === "stamps") {
    const text = JSON.stringify({ arrived, left });
    arrived = [];
    left = [];
    return { content: [{ type: "text", text }] };
  }
  throw new Error(`unknown tool ${name}`);
});

const transport = new StdioServerTransport();
await server.connect(transport);

const receive = transport.onmessage?.bind(transport);
transport.onmessage = (message) => {
  const request = message as { id?: string | number; method?: string; params?: { name?: string } };
  if (request.method === "tools/call" && request.params?.name === "echo" && request.id !== undefined) {
    arrived.push(monotonicNs());
    echoes.add(request.id);
  }
  receive?.(message);
};
const send = transport.send.bind(transport);
transport.send = (message) => {
  const response = message as { id?: string | number; method?: string };
  if (response.method === undefined && response.id !== undefined && echoes.delete(response.id)) {
    left.push(monotonicNs());
  }
  return send(message);
};

const leave = () => process.exit(0);
process.stdin.on("end", leave);
process.stdin.on("close", leave);
