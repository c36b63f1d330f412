// The MCP server: the SDK's low-level Server with our tool table, error model and result rendering.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  type JSONRPCRequest,
  ListToolsRequestSchema,
  type ProgressToken,
} from "@modelcontextprotocol/sdk/types.js";
import { ProtocolError } from "../errors.ts";
import { log } from "../log.ts";
import { NAME, VERSION } from "../version.ts";
import { progressForCall } from "./progress.ts";
import { render } from "./render.ts";
import { serveResources } from "./resources.ts";
import { jsonSchemaOf, parseArguments } from "./schema.ts";
import { StdioTransport } from "./stdio.ts";
import { TOOLS } from "./tools/index.ts";
import type { ServerContext } from "./tools/tool.ts";

const INSTRUCTIONS =
  "repl-mcp runs Python in a persistent local worker with full access to this machine: it is trusted " +
  "execution, not a sandbox. Variables and the asyncio loop persist between execute_python calls. Use " +
  "python_health for diagnostics (it never starts Python), python_start with python_run/python_cancel for " +
  "long work, and python_session_open for independent sessions on other projects. Inside cells, the mcp " +
  "helper calls tools of MCP servers the user configured for this broker only: mcp.call returns the full " +
  "result envelope and mcp.text extracts its text. A timeout or cancellation stops a cell, but effects it " +
  "already had on the outside world stay.";

const listing = TOOLS.map((tool) => ({
  name: tool.name,
  description: tool.description,
  inputSchema: jsonSchemaOf(tool.input),
  outputSchema: tool.output,
  annotations: tool.annotations,
}));

class MethodNotFound extends Error {
  readonly code = -32601;
  constructor() {
    super("Method not found");
  }
}

export async function serveStdio(ctx: ServerContext): Promise<void> {
  const server = new Server(
    { name: NAME, version: VERSION },
    {
      capabilities: { tools: { listChanged: false }, resources: { listChanged: true } },
      instructions: INSTRUCTIONS,
    },
  );
  serveResources(server, ctx.sessions.artifacts);

  // ttlMs/cacheScope tell clients (Claude Code) not to cache a catalogue that may differ per server.
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: listing,
    ttlMs: 0,
    cacheScope: "private",
  }));

  // tools/call is served from the fallback handler on purpose: a handler registered for it would first
  // run the SDK's own request schema, which answers non-object arguments with -32603 and a schema dump.
  // Here every argument failure is the contract's -32602 "Invalid arguments at <pointer>".
  server.fallbackRequestHandler = async (request: JSONRPCRequest, extra) => {
    if (request.method !== "tools/call") throw new MethodNotFound();
    const params = (request.params ?? {}) as { name?: unknown; arguments?: unknown };
    const tool = TOOLS.find((candidate) => candidate.name === params.name);
    if (!tool) throw new ProtocolError("Unknown tool");
    const args = parseArguments(tool.input, params.arguments);
    const token = extra._meta?.progressToken;
    const progress = progressForCall(token, (progress, message) => {
      const notification = { progressToken: token as ProgressToken, progress, message };
      extra.sendNotification({ method: "notifications/progress", params: notification }).catch(() => {});
    });
    try {
      const value = await tool.handle(args, ctx, { signal: extra.signal, onRun: progress.onRun });
      return render(value);
    } catch (error) {
      if (error instanceof ProtocolError) throw error;
      log.debug(`${tool.name} failed`, error);
      return render({ error: (error as Error).message ?? String(error) });
    } finally {
      progress.stop();
    }
  };

  const transport = new StdioTransport();
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  await server.connect(transport);
  await closed;
}
