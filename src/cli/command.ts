// The command line (contract §8). citty parses; this file owns the flag table and turns usage mistakes
// into clear errors before anything starts.
import { defineCommand, runMain, showUsage } from "citty";
import { LOG_LEVELS, type LogLevelName } from "../log.ts";
import { NAME, VERSION } from "../version.ts";

export interface ServeOptions {
  python: string | undefined;
  config: string | undefined;
  mcpScope: string;
  maxMemoryMib: number;
  logLevel: LogLevelName;
  journal: string | undefined;
}

export class UsageError extends Error {}

const args = {
  transport: {
    type: "string",
    description: "How MCP clients connect; only stdio is supported",
    default: "stdio",
    valueHint: "stdio",
  },
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
  "no-autoconnect": {
    type: "boolean",
    description: "Accepted for older launchers; connections are always lazy",
  },
  python: {
    type: "string",
    description:
      "Default Python interpreter (else $REPL_MCP_PYTHON, a python beside this binary, python3 on PATH)",
    valueHint: "path",
  },
  "max-memory-mib": {
    type: "string",
    description: "Worker RSS budget in MiB, sampled while a cell runs; 0 disables",
    default: "2048",
    valueHint: "mib",
  },
  journal: {
    type: "string",
    description: "Durable journal of brokered calls (effect metadata only), locked for this server",
    valueHint: "path",
  },
  "log-level": {
    type: "string",
    description: `Diagnostics on stderr: ${Object.keys(LOG_LEVELS).join(", ")}`,
    default: "warn",
    valueHint: "level",
  },
} as const;

const camel = (name: string) => name.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
// citty reports each flag under its own name and its camelCase alias; booleans also as their negation.
const KNOWN = new Set(["_", "autoconnect", ...Object.keys(args).flatMap((name) => [name, camel(name)])]);

function optionsFrom(parsed: Record<string, unknown>): ServeOptions {
  const unknown = Object.keys(parsed).filter((key) => !KNOWN.has(key));
  if (unknown.length > 0) throw new UsageError(`unknown option --${unknown[0]}; see ${NAME} --help`);
  const positional = parsed._ as string[] | undefined;
  if (positional?.length) throw new UsageError(`unexpected argument "${positional[0]}"; see ${NAME} --help`);
  if (parsed.transport !== "stdio") {
    throw new UsageError(`--transport must be stdio (got "${String(parsed.transport)}")`);
  }
  const mib = String(parsed["max-memory-mib"]);
  if (!/^\d+$/.test(mib) || !Number.isSafeInteger(Number(mib))) {
    throw new UsageError(`--max-memory-mib takes a whole number of MiB, 0 to disable (got "${mib}")`);
  }
  const level = String(parsed["log-level"]);
  if (!(level in LOG_LEVELS)) {
    throw new UsageError(`--log-level must be one of ${Object.keys(LOG_LEVELS).join(", ")} (got "${level}")`);
  }
  const python = parsed.python as string | undefined;
  if (python === "") throw new UsageError("--python needs a path");
  const config = parsed.config as string | undefined;
  if (config === "") throw new UsageError("--config needs a path");
  const journal = parsed.journal as string | undefined;
  if (journal === "") throw new UsageError("--journal needs a path");
  return {
    journal,
    python,
    config,
    mcpScope: String(parsed["mcp-scope"]),
    maxMemoryMib: Number(mib),
    logLevel: level as LogLevelName,
  };
}

export async function runCli(serve: (options: ServeOptions) => Promise<void>): Promise<void> {
  const command = defineCommand({
    meta: {
      name: NAME,
      version: VERSION,
      description:
        "MCP server giving AI agents a persistent, trusted local Python REPL. MCP clients start it over stdio.",
    },
    args,
    async run({ args: parsed }) {
      let options: ServeOptions;
      try {
        options = optionsFrom(parsed as Record<string, unknown>);
      } catch (error) {
        if (!(error instanceof UsageError)) throw error;
        await showUsage(command);
        process.stderr.write(`\n${NAME}: error: ${error.message}\n`);
        process.exit(2);
      }
      await serve(options);
    },
  });
  await runMain(command);
}
