// The help a human reads: what the program is, how to run it, every public flag, the environment it
// reads and a client configuration to copy. Built from the flag table, so it cannot fall behind it.
import { NAME, VERSION } from "../version.ts";
import { type Palette, palette } from "./colour.ts";
import { DOCTOR_FLAGS, ENVIRONMENT, type Flag, SERVE_FLAGS, SESSIONS_FLAGS, VIEWER_FLAGS } from "./flags.ts";

function flagLines(flags: Record<string, Flag>, paint: Palette, extra: [string, string][] = []): string[] {
  const rows = Object.entries(flags).map(([name, flag]) => {
    const label = `--${name}${flag.valueHint ? ` <${flag.valueHint}>` : ""}`;
    const notes = [
      flag.default === undefined ? "" : `default: ${flag.default}`,
      flag.env ? `env: ${flag.env}` : "",
    ].filter(Boolean);
    return [label, `${flag.description}${notes.length ? paint.dim(` (${notes.join("; ")})`) : ""}`] as const;
  });
  rows.push(["-h, --help", "Show this help"], ...extra);
  return table(rows, paint);
}

function table(rows: readonly (readonly [string, string])[], paint: Palette): string[] {
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${paint.cyan(left.padEnd(width))}  ${right}`);
}

/** The binary's own absolute path when compiled, so the example can be pasted as it is. */
function binaryPath(): string {
  const compiled = Bun.main.startsWith("/$bunfs/") || Bun.main.startsWith("B:/~BUN");
  return compiled ? process.execPath : `/absolute/path/to/${NAME}`;
}

export function serveHelp(stream: { isTTY?: boolean }): string {
  const paint = palette(stream);
  const example = JSON.stringify(
    { mcpServers: { [NAME]: { command: binaryPath(), args: ["--transport", "stdio"] } } },
    null,
    2,
  );
  return [
    `${paint.bold(NAME)} ${VERSION}: a persistent, trusted local Python REPL for AI agents, served over MCP.`,
    "An MCP client starts it and speaks JSON-RPC on its stdin/stdout; logs go to stderr.",
    "",
    paint.bold("Usage:"),
    `  ${NAME} [options]           serve MCP over stdio (what an MCP client runs)`,
    `  ${NAME} doctor [options]    check this setup: interpreter, registry, credentials, journal`,
    `  ${NAME} viewer [--open]     list the viewers (--viewer) of your running servers, or open one`,
    `  ${NAME} sessions [stop NAME|--all]  list kept sessions (parked or held), or end parked ones`,
    `  ${NAME} --version           print the version`,
    "",
    paint.bold("Options:"),
    ...flagLines(SERVE_FLAGS, paint, [["-v, --version", "Print the version"]]),
    "",
    paint.bold("Environment:"),
    ...table(ENVIRONMENT, paint),
    "",
    `${paint.bold("Client configuration")} (Claude Desktop, Cursor and any client with an mcpServers file):`,
    ...example.split("\n").map((line) => `  ${line}`),
    "",
    `Claude Code: claude mcp add ${NAME} -- ${binaryPath()}`,
    "Over HTTP with no token given, each start makes one and prints where it is and the",
    "claude mcp add --transport http ... --header command that passes it.",
    `Run '${NAME} doctor' to see what the server would do in this directory.`,
    "",
  ].join("\n");
}

export function doctorHelp(stream: { isTTY?: boolean }): string {
  const paint = palette(stream);
  return [
    `${paint.bold(`${NAME} doctor`)}: report what the server would do here, without starting a worker or`,
    "connecting anywhere (unless --connect asks): the interpreter and why, the registry sources, each",
    "server's grant and status, OAuth credential files, the journal; each problem with its fix.",
    "Exit status 0 when nothing is wrong, 1 when something is.",
    "",
    paint.bold("Usage:"),
    `  ${NAME} doctor [options]`,
    "",
    paint.bold("Options:"),
    ...flagLines(DOCTOR_FLAGS, paint),
    "",
  ].join("\n");
}

export function viewerHelp(stream: { isTTY?: boolean }): string {
  const paint = palette(stream);
  return [
    `${paint.bold(`${NAME} viewer`)}: list the viewers of this user's running servers (each started with`,
    "--viewer or REPL_MCP_VIEWER=1): project, pid, start time and URL, newest last. The URL carries the",
    "viewer's token: whoever has it can watch and cancel that server's runs.",
    "Exit status 0 when at least one is listed (or opened), 1 when none is running.",
    "",
    paint.bold("Usage:"),
    `  ${NAME} viewer [options]`,
    "",
    paint.bold("Options:"),
    ...flagLines(VIEWER_FLAGS, paint),
    "",
  ].join("\n");
}

export function sessionsHelp(stream: { isTTY?: boolean }): string {
  const paint = palette(stream);
  return [
    `${paint.bold(`${NAME} sessions`)}: the kept sessions of this user (python_session_open's keep, or`,
    "--keep-sessions): those parked, waiting for a server to adopt them, and those a running server holds,",
    "with their project, name, age, memory, expiry and holder. stop ends parked ones now: the worker, its",
    "process group and its record. A held session is ended by its server (python_session_close).",
    "Exit status 0 on success, 1 when a session to stop was not found or could not be stopped.",
    "",
    paint.bold("Usage:"),
    `  ${NAME} sessions [--json]`,
    `  ${NAME} sessions stop NAME [--project DIR]`,
    `  ${NAME} sessions stop --all`,
    "",
    paint.bold("Options:"),
    ...flagLines(SESSIONS_FLAGS, paint),
    "",
  ].join("\n");
}
