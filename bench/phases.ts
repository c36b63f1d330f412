// The four measurements. Each one interleaves the contenders (rotating who goes first) so drift in the
// machine's load or clock affects them alike, and discards warm-up rounds.
import { type Served, type ServerSpec, start, textOf, withServer } from "./lib/mcp.ts";
import { childrenOf, parentOf, rssKiB } from "./lib/proc.ts";
import { timeCommand, timeGuardian } from "./lib/spawn.ts";

export interface Contenders {
  /** repl-mcp with --python pointing at the real interpreter. */
  repl: ServerSpec;
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
  workerScript: string | undefined;
  evalLoopScript: string;
}

const CELL = { code: "1+1" };
const SETTLE_MS = 300;

function rotate<T>(items: readonly T[], by: number): T[] {
  const shift = by % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

function expectTwo(text: string, label: string): void {
  if (/(^|\s)2$/.test(text.trim())) return;
  throw new Error(`${label}: 1+1 answered ${JSON.stringify(text.slice(0, 200))}`);
}

function progress(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

// ---------------------------------------------------------------------------------------------------
// 1. spawn → initialize answered

export interface SpawnResult {
  repl: number[];
  trivial: number[];
}

export async function spawnToInitialize(c: Contenders, rounds: number, warmup: number): Promise<SpawnResult> {
  progress(`spawn → initialize: ${rounds} interleaved rounds (+${warmup} warm-up)`);
  const result: SpawnResult = { repl: [], trivial: [] };
  const entries = [
    ["repl", c.repl],
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
  replOnPath: FirstCellSample[];
  floor: FirstCellSample[];
  pythonPass: number[];
  pythonPassOnPath: number[];
  /** Pieces started alone: a guardian (start → exit on lifeline EOF), worker.py and the eval loop. */
  guardian: number[];
  workerAlone: number[];
  evalLoopAlone: number[];
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
    replOnPath: [],
    floor: [],
    pythonPass: [],
    pythonPassOnPath: [],
    guardian: [],
    workerAlone: [],
    evalLoopAlone: [],
  };
  const { workerScript } = c;
  // stdin is /dev/null for the lone Python pieces: each starts, sees end of input and exits.
  const variants: [keyof FirstCellResult, () => Promise<FirstCellSample | number>][] = [
    ["repl", () => firstCell(c.repl)],
    ["floor", () => firstCell(c.floor)],
    ["pythonPass", () => timeCommand([c.python, "-c", "pass"], c.env)],
    ["replOnPath", () => firstCell(c.replOnPath)],
    ["pythonPassOnPath", () => timeCommand([c.pythonOnPath, "-c", "pass"], c.env)],
    ["guardian", () => timeGuardian(c.binary, c.env)],
    ["evalLoopAlone", () => timeCommand([c.python, c.evalLoopScript], c.env)],
  ];
  if (workerScript) variants.push(["workerAlone", () => timeCommand([c.python, "-u", workerScript], c.env)]);
  progress(`first cell: ${rounds} interleaved rounds of ${variants.length} variants (+${warmup} warm-up)`);
  for (let round = 0; round < warmup + rounds; round++) {
    for (const [key, run] of rotate(variants, round)) {
      const sample = await run();
      if (round >= warmup) (result[key] as (FirstCellSample | number)[]).push(sample);
      await Bun.sleep(10);
    }
  }
  return result;
}

// ---------------------------------------------------------------------------------------------------
// 2. warm round trips, back-to-back and paced

interface Target {
  key: string;
  served: Served;
  tool: string;
  args: Record<string, unknown>;
}

export interface WarmResult {
  backToBack: Record<string, number[]>;
  paced: Record<string, number[]>;
  /** RSS of the long-lived contenders once all warm calls are done. */
  after: { cells: number; repl: ReplRss; floor: FloorRss };
}

async function timedCalls(target: Target, count: number, idleMs: number, into: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    if (idleMs > 0) await Bun.sleep(idleMs);
    const started = performance.now();
    await target.served.call(target.tool, target.args);
    into.push(performance.now() - started);
  }
}

async function interleaved(
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
  plan: { warmup: number; blocks: number; perBlock: number; pacedBlocks: number; pacedPerBlock: number },
): Promise<WarmResult> {
  progress(
    `warm round trips: ${plan.blocks}×${plan.perBlock} back-to-back and ` +
      `${plan.pacedBlocks}×${plan.pacedPerBlock} paced calls per contender`,
  );
  const repl = (await start(c.repl)).served;
  const floor = (await start(c.floor)).served;
  const mcp = (await start(c.trivial)).served;
  try {
    const replCell: Target = { key: "repl", served: repl, tool: "execute_python", args: CELL };
    const floorCell: Target = { key: "floor", served: floor, tool: "execute_python", args: CELL };
    const noop: Target = { key: "mcp", served: mcp, tool: "noop", args: {} };
    const health: Target = { key: "health", served: repl, tool: "python_health", args: {} };

    expectTwo(textOf(await repl.call("execute_python", CELL)), "repl-mcp");
    expectTwo(textOf(await floor.call("execute_python", CELL)), "composed floor");
    for (const target of [replCell, floorCell, noop, health]) await timedCalls(target, plan.warmup, 0, []);

    const backToBack = await interleaved([replCell, floorCell, noop, health], plan.blocks, plan.perBlock, 0);
    const paced = await interleaved([replCell, floorCell, noop], plan.pacedBlocks, plan.pacedPerBlock, 20);
    const cells = 1 + plan.warmup + plan.blocks * plan.perBlock + plan.pacedBlocks * plan.pacedPerBlock;
    await Bun.sleep(SETTLE_MS);
    return { backToBack, paced, after: { cells, repl: await replRss(repl), floor: floorRss(floor) } };
  } finally {
    await Promise.all([repl.stop(), floor.stop(), mcp.stop()]);
  }
}

// ---------------------------------------------------------------------------------------------------
// 4. resident memory

export interface ReplRss {
  server: number | undefined;
  guardian: number | undefined;
  worker: number | undefined;
}

export interface FloorRss {
  server: number | undefined;
  python: number | undefined;
}

export interface RssResult {
  replIdle: number[];
  trivialIdle: number[];
  floorIdle: number[];
  replOneCell: ReplRss[];
  replHundredCells: ReplRss[];
  floorOneCell: FloorRss[];
  floorHundredCells: FloorRss[];
}

/** Worker pid from python_health; the guardian is its parent (and a child of the server). */
async function replRss(served: Served): Promise<ReplRss> {
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
    server: rssKiB(served.pid),
    guardian: guardian === undefined ? undefined : rssKiB(guardian),
    worker: worker === undefined ? undefined : rssKiB(worker),
  };
}

function floorRss(served: Served): FloorRss {
  const python = childrenOf(served.pid)[0];
  return { server: rssKiB(served.pid), python: python === undefined ? undefined : rssKiB(python) };
}

async function cells(served: Served, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await served.call("execute_python", CELL);
}

export async function residentMemory(c: Contenders, rounds: number): Promise<RssResult> {
  progress(`resident memory: ${rounds} interleaved rounds`);
  const result: RssResult = {
    replIdle: [],
    trivialIdle: [],
    floorIdle: [],
    replOneCell: [],
    replHundredCells: [],
    floorOneCell: [],
    floorHundredCells: [],
  };
  const measurements: (() => Promise<void>)[] = [
    () =>
      withServer(c.repl, async (served) => {
        await served.call("python_health");
        await Bun.sleep(SETTLE_MS);
        result.replIdle.push(rssKiB(served.pid) ?? Number.NaN);
        await cells(served, 1);
        await Bun.sleep(SETTLE_MS);
        result.replOneCell.push(await replRss(served));
        await cells(served, 99);
        await Bun.sleep(SETTLE_MS);
        result.replHundredCells.push(await replRss(served));
      }),
    () =>
      withServer(c.trivial, async (served) => {
        await served.call("noop");
        await Bun.sleep(SETTLE_MS);
        result.trivialIdle.push(rssKiB(served.pid) ?? Number.NaN);
      }),
    () =>
      withServer(c.floor, async (served) => {
        await served.call("noop");
        await Bun.sleep(SETTLE_MS);
        result.floorIdle.push(rssKiB(served.pid) ?? Number.NaN);
        await cells(served, 1);
        await Bun.sleep(SETTLE_MS);
        result.floorOneCell.push(floorRss(served));
        await cells(served, 99);
        await Bun.sleep(SETTLE_MS);
        result.floorHundredCells.push(floorRss(served));
      }),
  ];
  for (let round = 0; round < rounds; round++) {
    for (const measure of rotate(measurements, round)) await measure();
  }
  return result;
}
