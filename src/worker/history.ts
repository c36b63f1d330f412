// The last finished results of a session, by run id, oldest evicted first.
import { HISTORY_RUNS } from "../limits.ts";
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
}
