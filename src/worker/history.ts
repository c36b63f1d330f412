// The last finished results of a session, by run id, oldest evicted first. Only the newest runs keep
// their inline pictures in memory; the supervisor turns older ones into artifacts (archivable()).
import { HISTORY_INLINE_IMAGES_MAX_BYTES, HISTORY_RUNS } from "../limits.ts";
import type { ExecutionResult } from "./result.ts";

export class RunHistory {
  private readonly results = new Map<string, ExecutionResult>();

  add(result: ExecutionResult): void {
    // Re-inserting moves a run to the newest position.
    this.results.delete(result.run_id);
    this.results.set(result.run_id, result);
    while (this.results.size > HISTORY_RUNS) {
      const oldest = this.results.keys().next().value as string;
      this.results.delete(oldest);
    }
  }

  get(runId: string): ExecutionResult | undefined {
    return this.results.get(runId);
  }

  latest(): ExecutionResult | undefined {
    let last: ExecutionResult | undefined;
    for (const result of this.results.values()) last = result;
    return last;
  }

  /**
   * Runs whose inline pictures no longer fit: walking from the newest, every run from the first one
   * that would take the pictures kept past HISTORY_INLINE_IMAGES_MAX_BYTES on.
   */
  archivable(): ExecutionResult[] {
    const older: ExecutionResult[] = [];
    let kept = 0;
    for (const result of [...this.results.values()].reverse()) {
      const size = inlineImageBytes(result);
      if (size === 0) continue;
      if (older.length === 0 && kept + size <= HISTORY_INLINE_IMAGES_MAX_BYTES) kept += size;
      else older.push(result);
    }
    return older;
  }

  /** Puts `updated` in place of `result`, keeping its position, unless that run was replaced or evicted. */
  replace(result: ExecutionResult, updated: ExecutionResult): void {
    if (this.results.get(result.run_id) === result) this.results.set(result.run_id, updated);
  }
}

/** Base64 characters of the pictures a result holds inline. */
export function inlineImageBytes(result: ExecutionResult): number {
  let size = 0;
  for (const display of result.displays ?? []) size += display.data?.length ?? 0;
  return size;
}
