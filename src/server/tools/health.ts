// python_health: the server, its default session and its sessions, without starting Python.
import * as v from "valibot";
import { BrokerHealth } from "../../broker/broker.ts";
import { KernelServerView, kernelServerView } from "../../kernels/config.ts";
import { SessionMetadata, sessionMetadata } from "../../sessions/metadata.ts";
import { SessionList, sessionList } from "./sessions.ts";
import { defineTool } from "./tool.ts";

export const pythonHealth = defineTool({
  name: "python_health",
  description:
    "Diagnose the server without side effects: server and default session ids (pass server.session_id as " +
    "session_id), worker generation, interpreter path, runtime, limits and sessions. Never starts Python " +
    "and never connects to other MCP servers.",
  input: v.strictObject({}),
  output: v.object({
    server: v.object({
      ...SessionMetadata.entries,
      /** Only while a viewer serves (--viewer): the page a person can watch the runs on. */
      viewer_url: v.optional(v.string()),
    }),
    broker: BrokerHealth,
    sessions: SessionList,
    /** Only with --kernels: the Jupyter servers configured (no token; nothing is contacted). */
    kernel_servers: v.optional(v.array(KernelServerView)),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handle(_args, ctx) {
    const { sessions, maxMemoryMib } = ctx;
    const viewer = sessions.viewerUrl;
    return {
      server: {
        ...sessionMetadata(sessions.default, maxMemoryMib),
        ...(viewer === undefined ? {} : { viewer_url: viewer }),
      },
      // The journal count is this client's, like mcp.journal(): over HTTP the server holds others' too.
      broker: { ...sessions.defaultBroker.health(), journal: sessions.journalRecords },
      sessions: sessionList(sessions, maxMemoryMib),
      ...(sessions.kernelServers.length > 0
        ? { kernel_servers: sessions.kernelServers.map(kernelServerView) }
        : {}),
    };
  },
});
