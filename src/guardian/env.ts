// The environment of every child started through a guardian (workers, probes, stdio MCP peers).

/**
 * The server's own environment, then `extra`, then REPL_MCP_NO_BRIDGE=1: a repl-mcp started from a
 * cell or as a peer must never broker MCP calls through this one.
 */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) out[key] = value;
  Object.assign(out, extra);
  out.REPL_MCP_NO_BRIDGE = "1";
  return out;
}
