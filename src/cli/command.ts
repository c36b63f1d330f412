// The command line (docs/cli.md). Serving is the default; `doctor` and `viewer` are the subcommands. Usage
// mistakes never reach stdout (an MCP client reads it as JSON-RPC): one line saying what is wrong and
// one hint go to stderr, and the exit status is 2. Help and the version are asked for, so they go to
// stdout.
import { parseArgs } from "citty";
import * as v from "valibot";
import { parseScopes, type Scope } from "../broker/registry.ts";
import { describe } from "../errors.ts";
import {
  APPROVAL_TIMEOUT_MAX_SECONDS,
  APPROVAL_TIMEOUT_MIN_SECONDS,
  KEEP_MAX_LIMIT_SECONDS,
} from "../limits.ts";
import { LOG_LEVELS, type LogLevelName } from "../log.ts";
import { DurationError, formatDuration, parseDuration } from "../parking/duration.ts";
import { ResultStyleSetting } from "../server/styles/table.ts";
import { NAME, VERSION } from "../version.ts";
import { palette } from "./colour.ts";
import { DOCTOR_FLAGS, type Flag, SERVE_FLAGS, SESSIONS_FLAGS, VIEWER_FLAGS } from "./flags.ts";
import { doctorHelp, serveHelp, sessionsHelp, viewerHelp } from "./help.ts";
import { type HttpOptions, httpOptions } from "./http.ts";

/** Where things are: shared by serving and doctor. */
export interface Placement {
  python: string | undefined;
  config: string | undefined;
  scopes: Set<Scope>;
  journal: string | undefined;
  /** --kernels (or REPL_MCP_KERNELS): the kernel servers file. */
  kernels: string | undefined;
  /** Where --python's value came from: the flag itself or REPL_MCP_PYTHON. */
  pythonFrom: "flag" | "env" | undefined;
  /** --sandbox (or REPL_MCP_SANDBOX): BUILTIN_SANDBOX for the built-in policy, else a policy file. */
  sandbox: string | undefined;
}

/** --sandbox without a file, or REPL_MCP_SANDBOX=builtin: the built-in policy alone. */
export const BUILTIN_SANDBOX = "builtin";

/** A bare --sandbox (last, or followed by another flag) means the built-in policy. */
function withBareSandbox(raw: string[]): string[] {
  return raw.map((arg, index) => {
    const next = raw[index + 1];
    return arg === "--sandbox" && (next === undefined || next.startsWith("-"))
      ? `--sandbox=${BUILTIN_SANDBOX}`
      : arg;
  });
}

export interface ServeOptions extends Placement {
  /** Set for --transport http. */
  http: HttpOptions | undefined;
  maxMemoryMib: number;
  /** --approval-timeout-s: how long a question to the person waits. */
  approvalTimeoutSeconds: number;
  resultStyle: ResultStyleSetting;
  logLevel: LogLevelName;
  /** Run the authorization-code login for this registry entry, then exit (no MCP server). */
  oauthLogin: string | undefined;
  /** --viewer (or REPL_MCP_VIEWER=1): serve the live page of sessions and runs. */
  viewer: boolean;
  /** --keep-sessions: seconds the default session (and opened ones, by default) outlive the server; 0 = none. */
  keepSessionsSeconds: number;
  /** --keep-sessions-max: the longest keep a session may ask for, in seconds. */
  keepMaxSeconds: number;
}

export interface SessionsCommandOptions {
  /** `stop`: end parked sessions (by name, or --all); otherwise list them. */
  stop: { name: string | undefined; all: boolean; project: string | undefined } | undefined;
  json: boolean;
}

export interface ViewerOptions {
  /** Open the newest viewer in the browser instead of listing them. */
  open: boolean;
}

export interface DoctorOptions extends Placement {
  json: boolean;
  connect: string | undefined;
}

export interface Commands {
  serve(options: ServeOptions): Promise<void>;
  doctor(options: DoctorOptions): Promise<number>;
  viewer(options: ViewerOptions): Promise<number>;
  sessions(options: SessionsCommandOptions): Promise<number>;
}

export class UsageError extends Error {}

const camel = (name: string) => name.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());

/** citty's parse, then every key checked: it reports each flag under its name and camelCase alias. */
function parse(raw: string[], flags: Record<string, Flag>, positionals = 0): Record<string, unknown> {
  // Defaults are applied below, after the environment, so a variable can stand in for an absent flag.
  const table = Object.fromEntries(
    Object.entries(flags).map(([name, { default: _, ...flag }]) => [name, flag]),
  );
  // The parser's result is a proxy that also answers camelCase names; a plain copy is easier to extend.
  const parsed = { ...(parseArgs(raw, table as Parameters<typeof parseArgs>[1]) as Record<string, unknown>) };
  // citty reads `--no-x` as x = false (and `--x` as x = true): only the negative form is a flag here.
  for (const name of Object.keys(flags)) {
    const positive = name.startsWith("no-") ? name.slice(3) : undefined;
    if (positive === undefined || parsed[positive] === undefined) continue;
    if (parsed[positive] === false) parsed[name] = true;
    else throw new UsageError(`unknown option --${positive}; did you mean --${name}?`);
    delete parsed[positive];
  }
  const known = new Set(["_", ...Object.keys(flags).flatMap((name) => [name, camel(name)])]);
  const unknown = Object.keys(parsed).find((key) => !known.has(key));
  if (unknown !== undefined) {
    const dashes = unknown.length === 1 ? "-" : "--";
    throw new UsageError(`unknown option ${dashes}${unknown}`);
  }
  const positional = parsed._ as string[] | undefined;
  if (positional && positional.length > positionals) {
    throw new UsageError(`unexpected argument "${positional[positionals]}"`);
  }
  for (const [name, flag] of Object.entries(flags)) {
    if (flag.type === "boolean" && flag.env && parsed[name] === undefined) {
      parsed[name] = envSwitch(flag.env);
      continue;
    }
    if (flag.type === "string" && parsed[name] === "") throw new UsageError(`--${name} needs a value`);
    if (flag.type !== "string" || parsed[name] !== undefined) continue;
    if (flag.env && process.env[flag.env]) {
      parsed[name] = process.env[flag.env];
      parsed[`${name}:from-env`] = true;
    } else if (flag.default !== undefined) {
      parsed[name] = flag.default;
    }
  }
  return parsed;
}

/** A boolean flag's variable: 1 or true turns it on, 0, false or unset leave it off. */
function envSwitch(name: string): boolean {
  const value = (process.env[name] ?? "").trim().toLowerCase();
  if (value === "1" || value === "true") return true;
  if (value === "" || value === "0" || value === "false") return false;
  throw new UsageError(`${name} must be 1 or 0 (got "${process.env[name]}")`);
}

function placement(parsed: Record<string, unknown>): Placement {
  let scopes: Set<Scope>;
  try {
    scopes = parseScopes(String(parsed["mcp-scope"]));
  } catch (error) {
    throw new UsageError(`--mcp-scope: ${describe(error)}`);
  }
  return {
    python: parsed.python as string | undefined,
    config: parsed.config as string | undefined,
    scopes,
    journal: parsed.journal as string | undefined,
    kernels: parsed.kernels as string | undefined,
    sandbox: parsed.sandbox as string | undefined,
    pythonFrom: parsed.python === undefined ? undefined : parsed["python:from-env"] ? "env" : "flag",
  };
}

function serveOptions(raw: string[]): ServeOptions {
  const parsed = parse(withBareSandbox(raw), SERVE_FLAGS);
  if (parsed.transport !== "stdio" && parsed.transport !== "http") {
    throw new UsageError(`--transport must be stdio or http (got "${String(parsed.transport)}")`);
  }
  const http = httpOptions(parsed, (message) => {
    throw new UsageError(message);
  });
  const mib = String(parsed["max-memory-mib"]);
  if (!/^\d+$/.test(mib) || !Number.isSafeInteger(Number(mib))) {
    throw new UsageError(`--max-memory-mib takes a whole number of MiB, 0 to disable (got "${mib}")`);
  }
  const approval = String(parsed["approval-timeout-s"]);
  const approvalSeconds = Number(approval);
  if (
    !/^\d+$/.test(approval) ||
    approvalSeconds < APPROVAL_TIMEOUT_MIN_SECONDS ||
    approvalSeconds > APPROVAL_TIMEOUT_MAX_SECONDS
  ) {
    throw new UsageError(
      `--approval-timeout-s takes whole seconds from ${APPROVAL_TIMEOUT_MIN_SECONDS} to ${APPROVAL_TIMEOUT_MAX_SECONDS} (got "${approval}")`,
    );
  }
  const level = String(parsed["log-level"]);
  if (!(level in LOG_LEVELS)) {
    throw new UsageError(`--log-level must be one of ${Object.keys(LOG_LEVELS).join(", ")} (got "${level}")`);
  }
  const keepMaxSeconds = durationFlag(parsed, "keep-sessions-max");
  if (keepMaxSeconds === 0 || keepMaxSeconds > KEEP_MAX_LIMIT_SECONDS) {
    throw new UsageError(
      `--keep-sessions-max must be more than 0 and at most ${formatDuration(KEEP_MAX_LIMIT_SECONDS)} (got "${String(parsed["keep-sessions-max"])}")`,
    );
  }
  const keepSessionsSeconds = durationFlag(parsed, "keep-sessions");
  if (keepSessionsSeconds > keepMaxSeconds) {
    throw new UsageError(
      `--keep-sessions "${String(parsed["keep-sessions"])}" is longer than --keep-sessions-max (${formatDuration(keepMaxSeconds)})`,
    );
  }
  const style = v.safeParse(ResultStyleSetting, parsed["result-style"]);
  if (!style.success) {
    throw new UsageError(
      `--result-style must be one of ${ResultStyleSetting.options.join(", ")} (got "${String(parsed["result-style"])}")`,
    );
  }
  return {
    ...placement(parsed),
    http,
    maxMemoryMib: Number(mib),
    approvalTimeoutSeconds: approvalSeconds,
    resultStyle: style.output,
    logLevel: level as LogLevelName,
    oauthLogin: parsed["oauth-login"] as string | undefined,
    viewer: parsed.viewer === true,
    keepSessionsSeconds,
    keepMaxSeconds,
  };
}

/** A duration flag's seconds; a value that is no duration is a usage error naming the flag and the value. */
function durationFlag(parsed: Record<string, unknown>, name: string): number {
  const value = String(parsed[name]);
  try {
    return parseDuration(value);
  } catch (error) {
    if (!(error instanceof DurationError)) throw error;
    const from = parsed[`${name}:from-env`]
      ? ` (from ${(SERVE_FLAGS as Record<string, Flag>)[name]?.env})`
      : "";
    throw new UsageError(`--${name}${from}: ${error.message}`);
  }
}

function sessionsOptions(raw: string[]): SessionsCommandOptions {
  const parsed = parse(raw, SESSIONS_FLAGS, 2);
  const positional = (parsed._ as string[] | undefined) ?? [];
  const json = parsed.json === true;
  const all = parsed.all === true;
  const project = parsed.project as string | undefined;
  if (positional.length === 0) {
    if (all || project !== undefined) throw new UsageError("--all and --project go with stop");
    return { stop: undefined, json };
  }
  if (positional[0] !== "stop") throw new UsageError(`unknown sessions command "${positional[0]}"; try stop`);
  const name = positional[1];
  if ((name === undefined) === !all) throw new UsageError("sessions stop takes a session name or --all");
  if (all && project !== undefined) throw new UsageError("--project goes with a session name, not --all");
  return { stop: { name, all, project }, json };
}

function doctorOptions(raw: string[]): DoctorOptions {
  const parsed = parse(withBareSandbox(raw), DOCTOR_FLAGS);
  return {
    ...placement(parsed),
    json: parsed.json === true,
    connect: parsed.connect as string | undefined,
  };
}

/** Flags before a `--` only: what follows it is never ours to interpret. */
const asks = (raw: string[], ...names: string[]) => {
  const end = raw.indexOf("--");
  return (end === -1 ? raw : raw.slice(0, end)).some((arg) => names.includes(arg));
};

function usageFailure(error: UsageError, command: string): never {
  const paint = palette(process.stderr);
  process.stderr.write(
    `${NAME}: ${paint.red("error:")} ${error.message}\n` +
      `Run '${command} --help' for the options and an example client configuration.\n`,
  );
  process.exit(2);
}

const SUBCOMMANDS = {
  doctor: {
    help: doctorHelp,
    run: (commands: Commands, raw: string[]) => commands.doctor(doctorOptions(raw)),
  },
  viewer: {
    help: viewerHelp,
    run: (commands: Commands, raw: string[]) =>
      commands.viewer({ open: parse(raw, VIEWER_FLAGS).open === true }),
  },
  sessions: {
    help: sessionsHelp,
    run: (commands: Commands, raw: string[]) => commands.sessions(sessionsOptions(raw)),
  },
} as const;

export async function runCli(commands: Commands, raw = process.argv.slice(2)): Promise<void> {
  const first = raw[0];
  const name =
    first !== undefined && Object.hasOwn(SUBCOMMANDS, first)
      ? (first as keyof typeof SUBCOMMANDS)
      : undefined;
  const sub = name === undefined ? undefined : SUBCOMMANDS[name];
  const rest = sub ? raw.slice(1) : raw;
  if (asks(rest, "--help", "-h")) {
    process.stdout.write(sub ? sub.help(process.stdout) : serveHelp(process.stdout));
    return;
  }
  if (!sub && asks(rest, "--version", "-v")) {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  try {
    if (sub) process.exitCode = await sub.run(commands, rest);
    else await commands.serve(serveOptions(rest));
  } catch (error) {
    if (error instanceof UsageError) usageFailure(error, name ? `${NAME} ${name}` : NAME);
    process.stderr.write(`${NAME}: error: ${describe(error)}\n`);
    process.exit(1);
  }
}
