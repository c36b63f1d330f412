// The four core measurements. Each one interleaves the contenders (rotating who goes first) so drift in the
// machine's load or clock affects them alike, and discards warm-up rounds.
import { LoneEvalLoop, LoneWorker } from "./lib/line-child.ts";
import { type Served, type ServerSpec, start, textOf, withServer } from "./lib/mcp.ts";
import {
  type CpuUse,
  childrenOf,
  cpuUse,
  parentOf,
  processTree,
  pssKiB,
  rssKiB,
  type TreeMemory,
  treeMemory,
} from "./lib/proc.ts";
import { timeCommand, timeGuardian } from "./lib/spawn.ts";

export interface Contenders {
  /** repl-mcp with --python pointing at the real interpreter. */
  repl: ServerSpec;
  /** The last build on the SDK 1.x (bench/lib/product-1x.ts), started the same way. */
  old: ServerSpec;
  /** repl-mcp left to find python3 on PATH (the pyenv shim, when there is one). */
  replOnPath: ServerSpec;
  /** The trivial compiled SDK server: the MCP floor. */
  trivial: ServerSpec;
  /** The trivial server forwarding execute_python to the stdlib eval loop: the composed floor. */
  floor: ServerSpec;
  /** The real interpreter, and the python3 that PATH finds (maybe a shim). */
  python: string;
  pythonOnPath: string;
  env: Record<string, string>;
  /** For the first-cell anatomy: the binary (its guardian mode), worker.py and the floor's eval loop. */
  binary: string;
  workerScript: string;
  evalLoopScript: string;
  /** The project directory every contender runs in. */
  cwd: string;
}

export const CELL = { code: "1+1" };
export const SETTLE_MS = 300;

export function rotate<T>(items: readonly T[], by: number): T[] {
  const shift = by % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

export function expectTwo(text: string, label: string): void {
  if (/(^|\s)2$/.test(text.trim())) return;
  throw new Error(`${label}: 1+1 answered ${JSON.stringify(text.slice(0, 200))}`);
}

export function progress(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

// ---------------------------------------------------------------------------------------------------
// 1. spawn → initialize answered

export interface SpawnResult {
  repl: number[];
  old: number[];
  trivial: number[];
}

export async function spawnToInitialize(c: Contenders, rounds: number, warmup: number): Promise<SpawnResult> {
  progress(`spawn → initialize: ${rounds} interleaved rounds (+${warmup} warm-up)`);
  const result: SpawnResult = { repl: [], old: [], trivial: [] };
  const entries = [
    ["repl", c.repl],
    ["old", c.old],
    ["trivial", c.trivial],
  ] as const;
  for (let round = 0; round < warmup + rounds; round++) {
    for (const [key, spec] of rotate(entries, round)) {
      const initMs = await withServer(spec, async (_served, ms) => ms);
      if (round >= warmup) result[key].push(initMs);
    }
  }
  return result;
}

// ---------------------------------------------------------------------------------------------------
// 3. first cell: spawn → initialize → first execute_python answered

export interface FirstCellSample {
  total: number;
  init: number;
}

export interface FirstCellResult {
  repl: FirstCellSample[];
  old: FirstCellSample[];
  replOnPath: FirstCellSample[];
  floor: FirstCellSample[];
  pythonPass: number[];
  pythonPassOnPath: number[];
  /** Pieces started alone: a guardian (start → exit on lifeline EOF), worker.py and the eval loop. */
  guardian: number[];
  workerAlone: LoneFirstCell[];
  evalLoopAlone: number[];
}

/** worker.py driven alone over pipes: spawn → ready frame, then ready → the first 1+1 result. */
export interface LoneFirstCell {
  ready: number;
  cell: number;
}

async function workerFirstCell(c: Contenders): Promise<LoneFirstCell> {
  const { worker, readyMs } = await LoneWorker.start(c.python, c.workerScript, c.env, c.cwd);
  try {
    const began = performance.now();
    expectTwo(String((await worker.execute(CELL.code)).return_value), "worker.py alone");
    return { ready: readyMs, cell: performance.now() - began };
  } finally {
    await worker.child.stop();
  }
}

async function evalLoopFirstCell(c: Contenders): Promise<number> {
  const began = performance.now();
  const loop = LoneEvalLoop.start(c.python, c.evalLoopScript, c.env, c.cwd);
  try {
    expectTwo(String((await loop.execute(CELL.code)).value), "eval loop alone");
    return performance.now() - began;
  } finally {
    await loop.child.stop();
  }
}

async function firstCell(spec: ServerSpec): Promise<FirstCellSample> {
  const started = performance.now();
  return withServer(spec, async (served, init) => {
    const result = await served.call("execute_python", CELL);
    const total = performance.now() - started;
    expectTwo(textOf(result), spec.label);
    return { total, init };
  });
}

export async function firstCellLatency(
  c: Contenders,
  rounds: number,
  warmup: number,
): Promise<FirstCellResult> {
  const result: FirstCellResult = {
    repl: [],
    old: [],
    replOnPath: [],
    floor: [],
    pythonPass: [],
    pythonPassOnPath: [],
    guardian: [],
    workerAlone: [],
    evalLoopAlone: [],
  };
  const variants: [keyof FirstCellResult, () => Promise<FirstCellSample | LoneFirstCell | number>][] = [
    ["repl", () => firstCell(c.repl)],
    ["old", () => firstCell(c.old)],
    ["floor", () => firstCell(c.floor)],
    ["pythonPass", () => timeCommand([c.python, "-c", "pass"], c.env)],
    ["replOnPath", () => firstCell(c.replOnPath)],
    ["pythonPassOnPath", () => timeCommand([c.pythonOnPath, "-c", "pass"], c.env)],
    ["guardian", () => timeGuardian(c.binary, c.env)],
    ["evalLoopAlone", () => evalLoopFirstCell(c)],
    ["workerAlone", () => workerFirstCell(c)],
  ];
  progress(`first cell: ${rounds} interleaved rounds of ${variants.length} variants (+${warmup} warm-up)`);
  for (let round = 0; round < warmup + rounds; round++) {
    for (const [key, run] of rotate(variants, round)) {
      const sample = await run();
      if (round >= warmup) (result[key] as (FirstCellSample | LoneFirstCell | number)[]).push(sample);
      await Bun.sleep(10);
    }
  }
  return result;
}

// ---------------------------------------------------------------------------------------------------
// 2. warm round trips, back-to-back and paced

export interface Target {
  key: string;
  call: () => Promise<unknown>;
}

export const toolCall = (
  key: string,
  served: Served,
  tool: string,
  args: Record<string, unknown> = {},
): Target => ({
  key,
  call: () => served.call(tool, args),
});

export interface WarmResult {
  backToBack: Record<string, number[]>;
  paced: Record<string, number[]>;
  /** Memory of the long-lived contenders once all warm calls are done. */
  after: { cells: number; repl: ReplMemory; old: ReplMemory; floor: FloorMemory };
  /** CPU time and wake-ups per back-to-back call, per process, measured over a run of calls of its own. */
  cpu: Record<"repl" | "old" | "floor" | "worker" | "evalLoop", ProcessCpu[]>;
}

export interface ProcessCpu {
  pid: number;
  cpuUs: number;
  wakeups: number;
}

/** Per-call CPU and wake-ups of every process in the tree under `pid`, over `calls` back-to-back calls. */
async function cpuPerCall(pid: number, target: Target, calls: number): Promise<ProcessCpu[]> {
  const pids = processTree(pid);
  const before = pids.map(cpuUse);
  for (let i = 0; i < calls; i++) await target.call();
  return pids.map((member, index) => {
    const after = cpuUse(member);
    const start = before[index] as CpuUse;
    return {
      pid: member,
      cpuUs: (after.cpuUs - start.cpuUs) / calls,
      wakeups: (after.wakeups - start.wakeups) / calls,
    };
  });
}

async function timedCalls(target: Target, count: number, idleMs: number, into: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    if (idleMs > 0) await Bun.sleep(idleMs);
    const started = performance.now();
    await target.call();
    into.push(performance.now() - started);
  }
}

export async function interleaved(
  targets: Target[],
  blocks: number,
  perBlock: number,
  idleMs: number,
): Promise<Record<string, number[]>> {
  const samples: Record<string, number[]> = Object.fromEntries(targets.map((t) => [t.key, []]));
  for (let block = 0; block < blocks; block++) {
    for (const target of rotate(targets, block)) {
      await timedCalls(target, perBlock, idleMs, samples[target.key] as number[]);
    }
  }
  return samples;
}

export async function warmRoundTrips(
  c: Contenders,
  plan: {
    warmup: number;
    blocks: number;
    perBlock: number;
    pacedBlocks: number;
    pacedPerBlock: number;
    cpuCalls: number;
  },
): Promise<WarmResult> {
  progress(
    `warm round trips: ${plan.blocks}×${plan.perBlock} back-to-back and ` +
      `${plan.pacedBlocks}×${plan.pacedPerBlock} paced calls per contender`,
  );
  const repl = (await start(c.repl)).served;
  const old = (await start(c.old)).served;
  const floor = (await start(c.floor)).served;
  const mcp = (await start(c.trivial)).served;
  const { worker } = await LoneWorker.start(c.python, c.workerScript, c.env, c.cwd);
  const evalLoop = LoneEvalLoop.start(c.python, c.evalLoopScript, c.env, c.cwd);
  try {
    const replCell = toolCall("repl", repl, "execute_python", CELL);
    const oldCell = toolCall("old", old, "execute_python", CELL);
    const floorCell = toolCall("floor", floor, "execute_python", CELL);
    const noop = toolCall("mcp", mcp, "noop");
    const health = toolCall("health", repl, "python_health");
    const oldHealth = toolCall("oldHealth", old, "python_health");
    const workerCell: Target = { key: "worker", call: () => worker.execute(CELL.code) };
    const evalCell: Target = { key: "evalLoop", call: () => evalLoop.execute(CELL.code) };
    const all = [replCell, oldCell, floorCell, noop, health, oldHealth, workerCell, evalCell];

    expectTwo(textOf(await repl.call("execute_python", CELL)), "repl-mcp");
    expectTwo(textOf(await old.call("execute_python", CELL)), "repl-mcp 1.x");
    expectTwo(textOf(await floor.call("execute_python", CELL)), "composed floor");
    expectTwo(String((await worker.execute(CELL.code)).return_value), "worker.py alone");
    expectTwo(String((await evalLoop.execute(CELL.code)).value), "eval loop alone");
    for (const target of all) await timedCalls(target, plan.warmup, 0, []);

    const backToBack = await interleaved(all, plan.blocks, plan.perBlock, 0);
    const paced = await interleaved(
      [replCell, oldCell, floorCell, noop, workerCell, evalCell],
      plan.pacedBlocks,
      plan.pacedPerBlock,
      20,
    );
    const cpu = {
      repl: await cpuPerCall(repl.pid, replCell, plan.cpuCalls),
      old: await cpuPerCall(old.pid, oldCell, plan.cpuCalls),
      floor: await cpuPerCall(floor.pid, floorCell, plan.cpuCalls),
      worker: await cpuPerCall(worker.child.pid, workerCell, plan.cpuCalls),
      evalLoop: await cpuPerCall(evalLoop.child.pid, evalCell, plan.cpuCalls),
    };
    const cells =
      1 + plan.warmup + plan.blocks * plan.perBlock + plan.pacedBlocks * plan.pacedPerBlock + plan.cpuCalls;
    await Bun.sleep(SETTLE_MS);
    const after = {
      cells,
      repl: await replMemory(repl),
      old: await replMemory(old),
      floor: floorMemory(floor),
    };
    return { backToBack, paced, after, cpu };
  } finally {
    await Promise.all([
      repl.stop(),
      old.stop(),
      floor.stop(),
      mcp.stop(),
      worker.child.stop(),
      evalLoop.child.stop(),
    ]);
  }
}

// ---------------------------------------------------------------------------------------------------
// 4. memory: PSS (the target) and RSS (reported) per process and over the whole tree

export interface ReplMemory {
  server: ProcessMemory;
  guardian: ProcessMemory;
  worker: ProcessMemory;
  tree: TreeMemory;
}

export interface FloorMemory {
  server: ProcessMemory;
  python: ProcessMemory;
  tree: TreeMemory;
}

export interface ProcessMemory {
  pss: number | undefined;
  rss: number | undefined;
}

export interface MemoryResult {
  replIdle: TreeMemory[];
  oldIdle: TreeMemory[];
  trivialIdle: TreeMemory[];
  floorIdle: TreeMemory[];
  replOneCell: ReplMemory[];
  replHundredCells: ReplMemory[];
  oldOneCell: ReplMemory[];
  oldHundredCells: ReplMemory[];
  floorOneCell: FloorMemory[];
  floorHundredCells: FloorMemory[];
}

function processMemory(pid: number | undefined): ProcessMemory {
  return pid === undefined ? { pss: undefined, rss: undefined } : { pss: pssKiB(pid), rss: rssKiB(pid) };
}

/** Worker pid from python_health; the guardian is its parent (and a child of the server). */
async function replMemory(served: Served): Promise<ReplMemory> {
  const health = await served.call("python_health");
  const structured = health.structuredContent as
    | { server?: { python?: { pid?: number } | null } }
    | undefined;
  const worker = structured?.server?.python?.pid ?? undefined;
  let guardian = worker === undefined ? undefined : parentOf(worker);
  if (guardian === undefined || !childrenOf(served.pid).includes(guardian)) {
    guardian = childrenOf(served.pid)[0];
  }
  return {
    server: processMemory(served.pid),
    guardian: processMemory(guardian),
    worker: processMemory(worker),
    tree: treeMemory(served.pid),
  };
}

function floorMemory(served: Served): FloorMemory {
  return {
    server: processMemory(served.pid),
    python: processMemory(childrenOf(served.pid)[0]),
    tree: treeMemory(served.pid),
  };
}

async function cells(served: Served, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await served.call("execute_python", CELL);
}

export async function memory(c: Contenders, rounds: number): Promise<MemoryResult> {
  progress(`memory: ${rounds} interleaved rounds`);
  const result: MemoryResult = {
    replIdle: [],
    oldIdle: [],
    trivialIdle: [],
    floorIdle: [],
    replOneCell: [],
    replHundredCells: [],
    oldOneCell: [],
    oldHundredCells: [],
    floorOneCell: [],
    floorHundredCells: [],
  };
  const settled = async <T>(read: () => T | Promise<T>): Promise<T> => {
    await Bun.sleep(SETTLE_MS);
    return read();
  };
  const product = (spec: ServerSpec, idle: TreeMemory[], one: ReplMemory[], hundred: ReplMemory[]) => () =>
    withServer(spec, async (served) => {
      await served.call("python_health");
      idle.push(await settled(() => treeMemory(served.pid)));
      await cells(served, 1);
      one.push(await settled(() => replMemory(served)));
      await cells(served, 99);
      hundred.push(await settled(() => replMemory(served)));
    });
  const measurements: (() => Promise<void>)[] = [
    product(c.repl, result.replIdle, result.replOneCell, result.replHundredCells),
    product(c.old, result.oldIdle, result.oldOneCell, result.oldHundredCells),
    () =>
      withServer(c.trivial, async (served) => {
        await served.call("noop");
        result.trivialIdle.push(await settled(() => treeMemory(served.pid)));
      }),
    () =>
      withServer(c.floor, async (served) => {
        await served.call("noop");
        result.floorIdle.push(await settled(() => treeMemory(served.pid)));
        await cells(served, 1);
        result.floorOneCell.push(await settled(() => floorMemory(served)));
        await cells(served, 99);
        result.floorHundredCells.push(await settled(() => floorMemory(served)));
      }),
  ];
  for (let round = 0; round < rounds; round++) {
    for (const measure of rotate(measurements, round)) await measure();
  }
  return result;
}
