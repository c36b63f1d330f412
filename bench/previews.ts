// Part three of `npm run bench`: the cost of previewing a pandas DataFrame and a numpy array as a
// cell's trailing value, at 10, 1,000 and 10,000,000 rows, measured in one run two ways:
//
//   1. execute_python round trips, the contenders interleaved in a new order every round, with a
//      plain `1` as the baseline and pandas' own repr() of the frames for scale;
//   2. the preview function alone, timed inside the worker (no IPC, so a busy machine blurs it less).
//
// A preview whose work does not depend on the value's size makes the 10M/10 ratios ~1×. (10 rows are
// shown whole; 1,000 and 10M rows as 5 from each end, which costs a second slice per column.)
// Needs /usr/bin/python3 with numpy and pandas (Debian's python3-numpy and python3-pandas).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type Served, start, stopAll } from "./lib/mcp.ts";
import { cleanEnv } from "./lib/spawn.ts";
import { formatMs, formatRatio, median } from "./lib/stats.ts";
import { table } from "./lib/table.ts";

const root = resolve(import.meta.dir, "..");
const binary = resolve(process.env.REPL_MCP_BINARY ?? join(root, "dist/repl-mcp"));
const PYTHON = "/usr/bin/python3";
const ROUNDS = 200;
/** Previews timed back to back inside the worker, per value. */
const INSIDE_ROUNDS = 2_000;
const SIZES = [10, 1_000, 10_000_000] as const;
/** Flat means the 10M-row value costs at most this much more than the 10-row one. */
const FLAT_RATIO = 1.25;

/** A frame made the way a data session makes one: numbers, a category, nullable integers, times. */
function frame(rows: number): string {
  return (
    `pd.DataFrame({'id': np.arange(${rows}), 'x': np.arange(${rows}) * 0.5, ` +
    `'kind': pd.Categorical(np.where(np.arange(${rows}) % 2, 'odd', 'even')), ` +
    `'n': pd.array(np.arange(${rows}), dtype='Int64'), ` +
    `'when': pd.Timestamp('2024-01-01') + pd.to_timedelta(np.arange(${rows}), unit='s')})`
  );
}

interface Contender {
  label: string;
  code: string;
  times: number[];
}

/** A copy of items in an order that depends only on seed (a small LCG drives a Fisher-Yates shuffle). */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const copy = [...items];
  let state = (seed * 2_654_435_761 + 1) >>> 0;
  for (let i = copy.length - 1; i > 0; i--) {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    const j = state % (i + 1);
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

const rows = (size: number) => size.toLocaleString("en");
const SMALL = SIZES[0];
const BIG = SIZES[SIZES.length - 1] as number;

/** Makes a frame and an array of every size in the session, and checks the big frame is previewed. */
async function setUp(served: Served): Promise<void> {
  const setup = ["import numpy as np, pandas as pd"];
  for (const size of SIZES)
    setup.push(`frame_${size} = ${frame(size)}`, `array_${size} = np.arange(${size}.0)`);
  const made = await served.call("execute_python", { code: setup.join("\n"), timeout: 600 });
  if ((made.structuredContent as { success?: boolean }).success !== true)
    throw new Error("setup cell failed");
  const check = await served.call("execute_python", { code: `frame_${BIG}` });
  const info = (check.structuredContent as { value_info?: { shape?: number[] } }).value_info;
  if (info?.shape?.[0] !== BIG) throw new Error("the big frame was not previewed as a frame");
}

function contenders(): Contender[] {
  const all: Contender[] = [{ label: "`1` (baseline round trip)", code: "1", times: [] }];
  for (const size of SIZES) {
    all.push({ label: `DataFrame, ${rows(size)} rows × 5 columns`, code: `frame_${size}`, times: [] });
  }
  for (const size of SIZES)
    all.push({ label: `ndarray, ${rows(size)} float64`, code: `array_${size}`, times: [] });
  for (const size of [SMALL, BIG]) {
    all.push({
      label: `for scale: pandas' repr() of ${rows(size)} rows`,
      code: `_ = repr(frame_${size})`,
      times: [],
    });
  }
  return all;
}

async function roundTrips(served: Served, all: Contender[]): Promise<void> {
  for (const contender of all) await served.call("execute_python", { code: contender.code });
  for (let round = 0; round < ROUNDS; round++) {
    // A new order every round: no contender always follows the same one (repr() of the big frame,
    // say), and a machine that changes pace slows every contender alike.
    for (const contender of shuffled(all, round)) {
      const began = performance.now();
      await served.call("execute_python", { code: contender.code });
      contender.times.push(performance.now() - began);
    }
  }
}

/** Median milliseconds of the worker's own preview function per value, reached through __main__. */
async function insideWorker(served: Served): Promise<Record<string, number>> {
  const names = SIZES.flatMap((size) => [`frame_${size}`, `array_${size}`]);
  const code = [
    "import sys, time",
    "preview = sys.modules['__main__']._library_preview",
    `samples = {name: [] for name in ${JSON.stringify(names)}}`,
    `for _ in range(${INSIDE_ROUNDS}):`,
    "    for name, times in samples.items():",
    "        value = globals()[name]",
    "        began = time.perf_counter()",
    "        preview(value)",
    "        times.append((time.perf_counter() - began) * 1000)",
    "{name: sorted(times)[len(times) // 2] for name, times in samples.items()}",
  ].join("\n");
  const timed = await served.call("execute_python", { code, timeout: 600 });
  const alone = (timed.structuredContent as { value?: Record<string, number> }).value;
  if (!alone) throw new Error("timing the preview inside the worker failed");
  return alone;
}

function report(all: Contender[], alone: Record<string, number>): void {
  const medianOf = (code: string) => median(all.find((c) => c.code === code)?.times ?? []);
  const baseline = medianOf("1");
  console.log(
    `\n10. a trailing value's preview at 10, 1,000 and 10 million rows: medians of ${ROUNDS} round trips`,
  );
  console.log(
    table(
      ["cell", "median", "over `1`"],
      all.map((c) => [c.label, formatMs(median(c.times)), formatMs(median(c.times) - baseline)]),
    ),
  );
  const [frameRatio, arrayRatio] = ["frame", "array"].map(
    (kind) => medianOf(`${kind}_${BIG}`) / medianOf(`${kind}_${SMALL}`),
  ) as [number, number];
  console.log(
    `  round trip, 10M rows / 10 rows: DataFrame ${formatRatio(frameRatio)}, ndarray ${formatRatio(arrayRatio)}`,
  );
  console.log(`\n  the preview alone, inside the worker (medians of ${INSIDE_ROUNDS} calls each):`);
  const line = (label: string, kind: string) => {
    const at = (size: number) => alone[`${kind}_${size}`] as number;
    return [
      label,
      ...SIZES.map((size) => formatMs(at(size))),
      formatRatio(at(BIG) / at(SMALL)),
      formatRatio(at(BIG) / at(SIZES[1])),
    ];
  };
  console.log(
    table(
      ["value", ...SIZES.map((size) => `${rows(size)} rows`), "10M / 10", "10M / 1,000"],
      [line("DataFrame, 5 columns", "frame"), line("ndarray, float64", "array")],
    ),
  );
  const flat = frameRatio <= FLAT_RATIO && arrayRatio <= FLAT_RATIO;
  console.log(
    `  target: round trip flat in the value's size (10M / 10 ≤ ${FLAT_RATIO}×) → ${flat ? "PASS" : "MISS"}`,
  );
}

async function main(): Promise<void> {
  const probe = Bun.spawnSync([PYTHON, "-c", "import numpy, pandas"], { stderr: "pipe" });
  if (probe.exitCode !== 0) {
    console.log(`\n10. previews: skipped, ${PYTHON} cannot import numpy and pandas`);
    return;
  }
  const tmp = mkdtempSync(join(tmpdir(), "repl-mcp-bench3-"));
  const home = join(tmp, "home");
  const project = join(tmp, "project");
  mkdirSync(home);
  mkdirSync(project);
  const env = cleanEnv({ HOME: home, XDG_CACHE_HOME: join(home, ".cache") });
  try {
    const { served } = await start({
      label: "repl-mcp",
      command: binary,
      args: ["--python", PYTHON],
      env,
      cwd: project,
    });
    await setUp(served);
    const all = contenders();
    await roundTrips(served, all);
    const alone = await insideWorker(served);
    await served.stop();
    report(all, alone);
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
