// worker.py is stdlib Python and cannot import src/limits.ts, so the limits both sides enforce are
// written twice. This test reads worker.py's constants and fails when the two disagree.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import * as limits from "../../src/limits.ts";

const source = readFileSync(resolve(import.meta.dir, "../../worker.py"), "utf8");

function workerConstant(name: string): number {
  const match = source.match(new RegExp(`^${name} = ([0-9_.]+)`, "m"));
  if (!match?.[1]) throw new Error(`worker.py has no numeric constant ${name}`);
  return Number(match[1].replaceAll("_", ""));
}

/** worker.py name → the limits.ts constant it must equal. */
const SHARED: Record<string, number> = {
  MAX_FRAME_BYTES: limits.FRAME_MAX_BYTES,
  STREAM_BUDGET_BYTES: limits.STREAM_CAPTURE_MAX_BYTES,
  PREVIEW_MAX_BYTES: limits.RETURN_PREVIEW_MAX_BYTES,
  ERROR_MAX_BYTES: limits.ERROR_TEXT_MAX_BYTES,
  VALUE_INFO_MAX_COLUMNS: limits.VALUE_INFO_COLUMNS_MAX,
  SOURCE_FILE_MAX_BYTES: limits.PYTHON_FILE_MAX_BYTES,
  SCRIPT_ARGV_MAX_ITEMS: limits.ARGV_MAX_ITEMS,
  SCRIPT_ARGV_MAX_BYTES: limits.ARGV_MAX_BYTES,
  BRIDGE_MAX_PENDING: limits.RPC_CONCURRENCY,
  BRIDGE_CALL_TIMEOUT: limits.BROKER_CALL_TIMEOUT_DEFAULT_SECONDS,
  BRIDGE_LIST_TIMEOUT: limits.BROKER_LIST_TIMEOUT_DEFAULT_SECONDS,
  BRIDGE_OPS_WAIT: limits.RPC_RESULT_WAIT_OPS_SECONDS,
  BRIDGE_TIMEOUT_MIN: limits.TIMEOUT_MIN_SECONDS,
  BRIDGE_TIMEOUT_MAX: limits.TIMEOUT_MAX_SECONDS,
  HISTORY_SOURCE_MAX_BYTES: limits.VIEWER_SOURCE_MAX_BYTES,
  HISTORY_OUTPUT_MAX_BYTES: limits.ADOPTED_HISTORY_OUTPUT_MAX_BYTES,
  HISTORY_FRAME_BUDGET_BYTES: limits.ADOPTED_HISTORY_MAX_BYTES,
};

test("worker.py and src/limits.ts agree on every limit they share", () => {
  const disagreements = Object.entries(SHARED)
    .map(([name, expected]) => ({ name, worker: workerConstant(name), limits: expected }))
    .filter(({ worker, limits }) => worker !== limits);
  expect(disagreements).toEqual([]);
});

test("an interrupted async cell unwinds within the server's interrupt grace", () => {
  expect(workerConstant("CANCEL_GRACE_SECONDS") * 1000).toBeLessThan(limits.INTERRUPT_GRACE_MS);
});

test("the reader finds constants (a renamed one fails loudly)", () => {
  expect(() => workerConstant("NO_SUCH_LIMIT")).toThrow("no numeric constant");
});
