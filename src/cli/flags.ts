// Every public flag, described once: the parser, `--help` and the table in docs/cli.md agree because they
// all come from here. Serving and `doctor` share the flags that say where things are.
import {
  APPROVAL_TIMEOUT_DEFAULT_SECONDS,
  HTTP_IDLE_TIMEOUT_DEFAULT_SECONDS,
  KEEP_MAX_DEFAULT_SECONDS,
  RSS_DEFAULT_MIB,
} from "../limits.ts";
import { LOG_LEVELS } from "../log.ts";
import { formatDuration } from "../parking/duration.ts";

export interface Flag {
  type: "string" | "boolean";
  description: string;
  valueHint?: string;
  default?: string;
  /** Defaulted from this environment variable when the flag is absent. */
  env?: string;
}

const where = {
  config: {
    type: "string",
    description:
      "Broker registry file (mcpServers JSON) shared by all sessions; default: <project>/.mcp.json",
    valueHint: "path",
  },
  "mcp-scope": {
    type: "string",
    description: "Broker registry sources: project, user, local (comma list), all or none",
    default: "project",
    valueHint: "scopes",
  },
  python: {
    type: "string",
    description: "Default Python interpreter (else a python beside this binary, else python3 on PATH)",
    valueHint: "path",
    env: "REPL_MCP_PYTHON",
  },
  journal: {
    type: "string",
    description: "Also keep the journal of brokered calls in this file, locked for this server",
    valueHint: "path",
  },
  kernels: {
    type: "string",
    description: "Kernel servers file (kernelServers JSON): the Jupyter servers this server may use",
    valueHint: "path",
    env: "REPL_MCP_KERNELS",
  },
  sandbox: {
    type: "string",
    description:
      "Contain every local worker in an OS sandbox (docs/sandbox.md): alone, the built-in policy; with a policy file, that file's rules added to it",
    valueHint: "file",
    env: "REPL_MCP_SANDBOX",
  },
} satisfies Record<string, Flag>;

export const SERVE_FLAGS = {
  transport: {
    type: "string",
    description: "How MCP clients connect: stdio (launched by the client) or http (Streamable HTTP at /mcp)",
    default: "stdio",
    valueHint: "stdio|http",
  },
  host: {
    type: "string",
    description: "http: address to listen on (default 127.0.0.1); anything not loopback needs a token",
    valueHint: "addr",
  },
  port: {
    type: "string",
    description: "http: TCP port (default 8765); 0 picks a free one, named on stderr",
    valueHint: "port",
  },
  "auth-token-file": {
    type: "string",
    description:
      "http: file (mode 0600) holding the bearer token clients must send; without it or $REPL_MCP_HTTP_TOKEN, each start makes a token and prints where it is",
    valueHint: "path",
  },
  "no-auth": {
    type: "boolean",
    description: "http, loopback only: require no token (then any local user can run code as you)",
  },
  "allowed-origin": {
    type: "string",
    description: "http: browser origins accepted besides loopback ones (comma list)",
    valueHint: "origins",
  },
  "allowed-host": {
    type: "string",
    description: "http: Host names accepted besides loopback ones and --host (comma list; * for any)",
    valueHint: "names",
  },
  "idle-timeout-s": {
    type: "string",
    description: "http: end an MCP session (and its Python sessions) after this many idle seconds",
    default: String(HTTP_IDLE_TIMEOUT_DEFAULT_SECONDS),
    valueHint: "seconds",
  },
  ...where,
  "oauth-login": {
    type: "string",
    description:
      "Grant the broker OAuth access to this HTTP server of the registry (browser login), then exit",
    valueHint: "server",
  },
  "no-autoconnect": {
    type: "boolean",
    description: "Accepted for older launchers; connections are always lazy",
  },
  "max-memory-mib": {
    type: "string",
    description: "Worker RSS budget in MiB, sampled while a cell runs; 0 disables",
    default: String(RSS_DEFAULT_MIB),
    valueHint: "mib",
  },
  "keep-sessions": {
    type: "string",
    description:
      "Keep the default session, and by default every opened session, this long after the server exits (90m, 8h, 7d): the next server adopts it with its variables; 0 keeps none",
    default: "0",
    valueHint: "duration",
    env: "REPL_MCP_KEEP_SESSIONS",
  },
  "keep-sessions-max": {
    type: "string",
    description: "The longest keep a session may ask for (python_session_open's keep)",
    default: formatDuration(KEEP_MAX_DEFAULT_SECONDS),
    valueHint: "duration",
  },
  "approval-timeout-s": {
    type: "string",
    description:
      "How long a call that needs the person's approval (the registry's approve), or input() in a cell, waits for their answer",
    default: String(APPROVAL_TIMEOUT_DEFAULT_SECONDS),
    valueHint: "seconds",
  },
  "result-style": {
    type: "string",
    description:
      "How tool results are shaped: auto (by the client: text for Claude Code, Codex and Gemini CLI, else structured), structured (always outputSchema and structuredContent) or text (no structuredContent: what a model reads)",
    default: "auto",
    valueHint: "auto|structured|text",
    env: "REPL_MCP_RESULT_STYLE",
  },
  viewer: {
    type: "boolean",
    description:
      "Serve a live page of the sessions and runs on 127.0.0.1 (a free port, with a token; the URL goes to stderr)",
    env: "REPL_MCP_VIEWER",
  },
  "log-level": {
    type: "string",
    description: `Diagnostics on stderr: ${Object.keys(LOG_LEVELS).join(", ")}`,
    default: "warn",
    valueHint: "level",
    env: "REPL_MCP_LOG_LEVEL",
  },
} satisfies Record<string, Flag>;

export const DOCTOR_FLAGS = {
  ...where,
  json: { type: "boolean", description: "Print the report as one JSON object" },
  connect: {
    type: "string",
    description: "Also connect to this registry server and list its tools",
    valueHint: "name",
  },
} satisfies Record<string, Flag>;

export const VIEWER_FLAGS = {
  open: {
    type: "boolean",
    description: "Open the newest viewer in the browser (xdg-open, or open on macOS)",
  },
} satisfies Record<string, Flag>;

export const SESSIONS_FLAGS = {
  json: { type: "boolean", description: "Print the list as one JSON object" },
  all: { type: "boolean", description: "With stop: end every parked session of this user" },
  project: {
    type: "string",
    description:
      "With stop NAME: the session's project directory (needed when several projects park that name)",
    valueHint: "path",
  },
} satisfies Record<string, Flag>;

export const ENVIRONMENT: [name: string, meaning: string][] = [
  ["REPL_MCP_PYTHON", "default interpreter, as --python"],
  ["REPL_MCP_NO_BRIDGE=1", "disable the broker (set for workers and stdio peers, so brokers never nest)"],
  ["REPL_MCP_LOG_LEVEL", "default for --log-level"],
  ["REPL_MCP_KERNELS", "default for --kernels"],
  ["REPL_MCP_KEEP_SESSIONS", "default for --keep-sessions"],
  ["REPL_MCP_RESULT_STYLE", "default for --result-style (auto, structured or text)"],
  ["REPL_MCP_VIEWER=1", "as --viewer (never passed to children)"],
  [
    "REPL_MCP_HTTP_TOKEN",
    "with --transport http: the bearer token, instead of --auth-token-file (never passed to children)",
  ],
  [
    "XDG_RUNTIME_DIR",
    "where a generated HTTP token, the viewers' address files and parked sessions are kept (else the cache directory)",
  ],
  ["XDG_CACHE_HOME", "the worker's cache directory (default ~/.cache/repl-mcp)"],
  ["HOME", "needed for the user and local registry scopes (~/.claude.json)"],
  ["TMPDIR", "where artifact files are created"],
  ["NO_COLOR, FORCE_COLOR", "colour in --help and doctor output (by default only on a terminal)"],
  [
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the literal placeholder syntax, shown to users
    "${VAR}",
    "any variable a registry entry names in its command, args, env, url, headers or oauth, or a kernel server in its url or token (those are kept from children)",
  ],
];
