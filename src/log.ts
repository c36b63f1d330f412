// The one logger. stdout carries MCP frames, so every level goes to stderr. consola's core build with a
// one-line reporter keeps start-up fast (the full build loads its fancy reporters eagerly).
import { formatWithOptions } from "node:util";
import { type ConsolaReporter, createConsola, type LogLevel } from "consola/core";

const stderrReporter: ConsolaReporter = {
  log(entry) {
    const text = formatWithOptions({ colors: false, breakLength: Number.POSITIVE_INFINITY }, ...entry.args);
    process.stderr.write(`repl-mcp ${entry.type}: ${text}\n`);
  },
};

export const log = createConsola({ reporters: [stderrReporter], level: 1 });

export const LOG_LEVELS = { silent: -999, error: 0, warn: 1, info: 3, debug: 4, trace: 5 } as const;
export type LogLevelName = keyof typeof LOG_LEVELS;

export function setLogLevel(name: LogLevelName): void {
  log.level = LOG_LEVELS[name] as LogLevel;
}

/**
 * While serving, stdout carries MCP messages only: a library that logs with console.log/info/debug
 * (@jupyterlab/services does) is sent to this logger's debug level instead.
 */
export function keepConsoleOffStdout(): void {
  const toLog = (...args: unknown[]) => log.debug(args[0], ...args.slice(1));
  console.log = toLog;
  console.info = toLog;
  console.debug = toLog;
}
