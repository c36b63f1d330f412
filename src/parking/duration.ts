// How long a session is kept after its server lets it go: a whole number and one unit ("90m", "8h",
// "7d"), as the person writes it in a flag and an agent in python_session_open. "0" means not kept.
import { ReplError } from "../errors.ts";

const UNITS = { s: 1, m: 60, h: 3_600, d: 86_400 } as const;
const SHAPE = /^(\d{1,9})([smhd])$/;

/** What `keep` and --keep-sessions accept, for messages. */
export const KEEP_SHAPE =
  'a whole number and a unit: s, m, h or d (e.g. "90m", "8h", "7d"), or "0" for not kept';

export class DurationError extends Error {}

/** Seconds of `text`; 0 for "0". Throws DurationError naming `text` when it is not a duration. */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (trimmed === "0") return 0;
  const match = SHAPE.exec(trimmed);
  if (!match) throw new DurationError(`"${text}" is not a duration: use ${KEEP_SHAPE}`);
  return Number(match[1]) * UNITS[match[2] as keyof typeof UNITS];
}

/** The largest unit that divides `seconds` exactly: 28800 → "8h", 5400 → "90m". */
export function formatDuration(seconds: number): string {
  if (seconds === 0) return "0";
  for (const unit of ["d", "h", "m"] as const) {
    if (seconds % UNITS[unit] === 0) return `${seconds / UNITS[unit]}${unit}`;
  }
  return `${seconds}s`;
}

/**
 * A session's keep as asked for (python_session_open's `keep`): its seconds, within `maxSeconds`.
 * Refused with INVALID_ARGUMENT, naming the value and the limit.
 */
export function keepSeconds(text: string, maxSeconds: number): number {
  let seconds: number;
  try {
    seconds = parseDuration(text);
  } catch (error) {
    throw new ReplError("INVALID_ARGUMENT", `keep: ${(error as Error).message}`);
  }
  if (seconds > maxSeconds) {
    throw new ReplError(
      "INVALID_ARGUMENT",
      `keep "${text}" is longer than this server allows (${formatDuration(maxSeconds)}, --keep-sessions-max)`,
    );
  }
  return seconds;
}
