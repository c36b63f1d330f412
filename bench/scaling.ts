// How repl-mcp's costs grow: the memory of each extra session with a live worker against one more
// floor eval loop, and the cost of a trivial cell once the namespace is large or the run history is
// full of large results, against the same server left small, timed side by side.
import { LoneEvalLoop } from "./lib/line-child.ts";
import { type Served, type ServerSpec, start, textOf } from "./lib/mcp.ts";
import { cpuUse, processTree, type TreeMemory, treeMemory } from "./lib/proc.ts";
import {
  CELL,
  type Contenders,
  expectTwo,
  interleaved,
  progress,
  rotate,
  SETTLE_MS,
  type Target,
  toolCall,
} from "./phases.ts";

/** Sessions opened on top of the default one, each running one cell. */
export const EXTRA_SESSIONS = 8;
/** Variables a cell defines in the "large namespace" server. */
export const NAMESPACE_VARIABLES = 10_000;
/** Runs of retained history, each with large stdout and return value (the history holds 64). */
export const HISTORY_RUNS = 64;
const GROWTH_WARMUP_CALLS = 300;
const GROWTH_REFILL_PAUSE_MS = 500;
const HISTORY_CELL = "print('o' * 50_000)\n'r' * 20_000";

export interface SessionsResult {
  /** Tree memory with the default session's worker live, then with EXTRA_SESSIONS more. */
  repl: { before: TreeMemory; after: TreeMemory }[];
  /** The same for the 1.x build. */
  old: { before: TreeMemory; after: TreeMemory }[];
  /** The composed floor after one cell, then with EXTRA_SESSIONS more eval loops each after one cell. */
  floor: { before: TreeMemory; after: TreeMemory }[];
}

async function settledTree(pid: number): Promise<TreeMemory> {
  await Bun.sleep(SETTLE_MS);
  return treeMemory(pid);
}

function sumTrees(trees: TreeMemory[]): TreeMemory {
  return trees.reduce(
    (sum, tree) => ({
      pss: sum.pss + tree.pss,
      rss: sum.rss + tree.rss,
      processes: sum.processes + tree.processes,
    }),
    { pss: 0, rss: 0, processes: 0 },
  );
}

async function replSessions(
  spec: ServerSpec,
  cwd: string,
): Promise<{ before: TreeMemory; after: TreeMemory }> {
  const { served } = await start(spec);
  try {
    expectTwo(textOf(await served.call("execute_python", CELL)), spec.label);
    const before = await settledTree(served.pid);
    for (let i = 0; i < EXTRA_SESSIONS; i++) {
      const opened = await served.call("python_session_open", { name: `bench-${i}`, project: cwd });
      const sessionId = (opened.structuredContent as { session_id: string }).session_id;
      const result = await served.call("execute_python", { ...CELL, session_id: sessionId });
      expectTwo(textOf(result), `${spec.label} session ${i}`);
    }
    return { before, after: await settledTree(served.pid) };
  } finally {
    await served.stop();
  }
}

async function floorLoops(c: Contenders): Promise<{ before: TreeMemory; after: TreeMemory }> {
  const { served } = await start(c.floor);
  const loops: LoneEvalLoop[] = [];
  try {
    expectTwo(textOf(await served.call("execute_python", CELL)), "composed floor");
    const before = await settledTree(served.pid);
    for (let i = 0; i < EXTRA_SESSIONS; i++) {
      const loop = LoneEvalLoop.start(c.python, c.evalLoopScript, c.env, c.cwd);
      loops.push(loop);
      expectTwo(String((await loop.execute(CELL.code)).value), "eval loop");
    }
    await Bun.sleep(SETTLE_MS);
    return {
      before,
      after: sumTrees([treeMemory(served.pid), ...loops.map((loop) => treeMemory(loop.child.pid))]),
    };
  } finally {
    await Promise.all([served.stop(), ...loops.map((loop) => loop.child.stop())]);
  }
}

export async function extraSessions(c: Contenders, rounds: number): Promise<SessionsResult> {
  progress(`extra sessions: ${rounds} rounds of ${EXTRA_SESSIONS} sessions vs ${EXTRA_SESSIONS} eval loops`);
  const result: SessionsResult = { repl: [], old: [], floor: [] };
  for (let round = 0; round < rounds; round++) {
    const steps = [
      async () => result.repl.push(await replSessions(c.repl, c.cwd)),
      async () => result.old.push(await replSessions(c.old, c.cwd)),
      async () => result.floor.push(await floorLoops(c)),
    ];
    for (const step of rotate(steps, round)) await step();
  }
  return result;
}

export interface GrowthResult {
  /** Back-to-back 1+1 round trips per server: small, large namespace, full history. */
  samples: Record<GrowthKey, number[]>;
  /** CPU time per timed call of the server's whole tree (server, guardian, worker), in µs. */
  cpuUs: Record<GrowthKey, number>;
  memory: Record<GrowthKey, TreeMemory>;
}

type GrowthKey = "small" | "namespace" | "history";

function treeCpuUs(pid: number): number {
  return processTree(pid).reduce((sum, member) => sum + cpuUse(member).cpuUs, 0);
}

async function fillHistory(served: Served, runs: number): Promise<void> {
  for (let i = 0; i < runs; i++) await served.call("execute_python", { code: HISTORY_CELL });
}

/**
 * Three servers side by side: one left small, one whose namespace holds NAMESPACE_VARIABLES
 * variables, one whose history is kept full of large results (refilled between timed blocks, since
 * the timed cells themselves push old runs out).
 */
export async function growth(c: Contenders, blocks: number, perBlock: number): Promise<GrowthResult> {
  progress(
    `growth: ${blocks}×${perBlock} calls each on a small, a large-namespace and a full-history server`,
  );
  const small = (await start(c.repl)).served;
  const namespace = (await start(c.repl)).served;
  const history = (await start(c.repl)).served;
  try {
    expectTwo(textOf(await small.call("execute_python", CELL)), "small");
    const defined = await namespace.call("execute_python", {
      code: `for __i in range(${NAMESPACE_VARIABLES}): globals()[f"v{__i}"] = [__i, str(__i)]\nlen(globals())`,
    });
    if (Number(textOf(defined).trim().split(/\s/).pop()) < NAMESPACE_VARIABLES) {
      throw new Error(`large namespace: the cell answered ${textOf(defined).slice(0, 200)}`);
    }
    await fillHistory(history, HISTORY_RUNS);
    const servers: Record<GrowthKey, Served> = { small, namespace, history };
    const targets: Target[] = (Object.keys(servers) as GrowthKey[]).map((key) =>
      toolCall(key, servers[key], "execute_python", CELL),
    );
    const samples: GrowthResult["samples"] = { small: [], namespace: [], history: [] };
    const cpu: GrowthResult["cpuUs"] = { small: 0, namespace: 0, history: 0 };
    // The same warm-up for all three: the grown servers have already served many calls, and a server's
    // JIT keeps getting faster for the first hundreds of calls, which would flatter them.
    for (const target of targets) await interleaved([target], 1, GROWTH_WARMUP_CALLS, 0);
    for (let block = 0; block < blocks; block++) {
      for (const target of rotate(targets, block)) {
        const key = target.key as GrowthKey;
        const before = treeCpuUs(servers[key].pid);
        const timed = await interleaved([target], 1, perBlock, 0);
        cpu[key] += treeCpuUs(servers[key].pid) - before;
        samples[key].push(...(timed[key] ?? []));
      }
      await fillHistory(history, perBlock);
      // The refill's garbage is the server's to collect before the next timed block, not during it.
      await Bun.sleep(GROWTH_REFILL_PAUSE_MS);
    }
    for (const key of Object.keys(cpu) as GrowthKey[]) cpu[key] /= blocks * perBlock;
    await Bun.sleep(SETTLE_MS);
    const memory = {
      small: treeMemory(small.pid),
      namespace: treeMemory(namespace.pid),
      history: treeMemory(history.pid),
    };
    return { samples, cpuUs: cpu, memory };
  } finally {
    await Promise.all([small.stop(), namespace.stop(), history.stop()]);
  }
}
