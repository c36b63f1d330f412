// The environment of every child started through a guardian (workers, probes, stdio MCP peers), and of
// the guardians themselves.

/** The bearer token of --transport http, when it comes from the environment. */
export const HTTP_TOKEN_ENV = "REPL_MCP_HTTP_TOKEN";

/** --viewer, from the environment: a repl-mcp started from a cell must not open a viewer of its own. */
export const VIEWER_ENV = "REPL_MCP_VIEWER";

/**
 * Secrets the server reads from its own environment. No child inherits them: a worker runs whatever a
 * client sends, a stdio peer is someone else's program, and neither needs the server's credentials.
 * A registry entry that names one in its own `env` still passes it to that peer, on purpose.
 */
const WITHHELD = new Set([HTTP_TOKEN_ENV, VIEWER_ENV]);

/** Adds variables that hold the server's own credentials (a kernel server's `${TOKEN}`) to WITHHELD. */
export function withholdFromChildren(names: Iterable<string>): void {
  for (const name of names) WITHHELD.add(name);
}

/** The server's environment without the secrets in WITHHELD. */
export function inheritableEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !WITHHELD.has(key)) out[key] = value;
  }
  return out;
}

/**
 * The inheritable environment, then `extra`, then REPL_MCP_NO_BRIDGE=1: a repl-mcp started from a
 * cell or as a peer must never broker MCP calls through this one.
 */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const out = inheritableEnv();
  Object.assign(out, extra);
  out.REPL_MCP_NO_BRIDGE = "1";
  return out;
}
