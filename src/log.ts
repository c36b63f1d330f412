// The one logger. stdout carries MCP frames, so every level goes to stderr.
import { createConsola, type LogLevel } from "consola";

export const log = createConsola({
  stdout: process.stderr,
  stderr: process.stderr,
  formatOptions: { date: false, colors: false },
});

export const LOG_LEVELS = { silent: -999, error: 0, warn: 1, info: 3, debug: 4, trace: 5 } as const;
export type LogLevelName = keyof typeof LOG_LEVELS;

export function setLogLevel(name: LogLevelName): void {
  log.level = LOG_LEVELS[name] as LogLevel;
}
