// A cell printing 200 MB: repl-mcp and its 1.x build against the composed floor (whose eval loop keeps
// 50,000 characters) and Python writing the same to /dev/null, with each server's peak RSS growth while
// the cell runs. Contenders take turns, rotating who goes first.
import { type Served, start } from "./lib/mcp.ts";
import { rssKiB } from "./lib/proc.ts";
import { timeCommand } from "./lib/spawn.ts";
import { type Contenders, progress, rotate } from "./phases.ts";

export const FLOOD_CODE = "for _ in range(2_000_000):\n    print('x' * 99)";
/** How often a server's RSS is read while its flood runs. */
const SAMPLE_MS = 10;

export interface FloodResult {
  /** Milliseconds per flood cell. */
  times: Record<"repl" | "old" | "floor" | "devnull", number[]>;
  /** The largest growth of each product's server RSS over one flood cell, in KiB. */
  growthKiB: Record<"repl" | "old", number>;
  /** Bytes of stdout each product kept. */
  keptBytes: Record<"repl" | "old", number>;
}

/** One flood cell on a product, with the server's RSS sampled while it runs. */
async function productFlood(served: Served): Promise<{ ms: number; growthKiB: number; kept: number }> {
  const before = rssKiB(served.pid) ?? 0;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssKiB(served.pid) ?? 0);
  }, SAMPLE_MS);
  const began = performance.now();
  try {
    const result = await served.call("execute_python", { code: FLOOD_CODE, timeout: 600 });
    const ms = performance.now() - began;
    const stdout = String((result.structuredContent as { stdout?: string }).stdout ?? "");
    return { ms, growthKiB: peak - before, kept: Buffer.byteLength(stdout) };
  } finally {
    clearInterval(sampler);
  }
}

export async function flood(c: Contenders, rounds: number): Promise<FloodResult> {
  progress(`output flood: ${rounds} rounds of a 200 MB cell per contender`);
  const repl = (await start(c.repl)).served;
  const old = (await start(c.old)).served;
  const floor = (await start(c.floor)).served;
  const result: FloodResult = {
    times: { repl: [], old: [], floor: [], devnull: [] },
    growthKiB: { repl: 0, old: 0 },
    keptBytes: { repl: 0, old: 0 },
  };
  try {
    for (const served of [repl, old, floor]) await served.call("execute_python", { code: "1" });
    const product = (key: "repl" | "old", served: Served) => async () => {
      const { ms, growthKiB, kept } = await productFlood(served);
      result.times[key].push(ms);
      result.growthKiB[key] = Math.max(result.growthKiB[key], growthKiB);
      result.keptBytes[key] = kept;
    };
    const steps = [
      product("repl", repl),
      product("old", old),
      async () => {
        const began = performance.now();
        await floor.call("execute_python", { code: FLOOD_CODE });
        result.times.floor.push(performance.now() - began);
      },
      async () => {
        result.times.devnull.push(await timeCommand([c.python, "-c", FLOOD_CODE], c.env));
      },
    ];
    for (let round = 0; round < rounds; round++) {
      for (const step of rotate(steps, round)) await step();
    }
    return result;
  } finally {
    await Promise.all([repl.stop(), old.stop(), floor.stop()]);
  }
}
