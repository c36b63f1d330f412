// Turns the measurements into the printed report: one table per measurement, then the targets of
// design.md ("Performance targets") next to the measured ratios. Misses are reported, never fatal.

import { formatMiB, formatMs, formatRatio, median, summarize } from "./lib/stats.ts";
import { table } from "./lib/table.ts";
import type { FirstCellResult, FloorRss, ReplRss, RssResult, SpawnResult, WarmResult } from "./phases.ts";

/** Figures design.md reports for this machine, printed beside ours as a sanity check. */
const DESIGN = {
  trivialInitMs: 70,
  floorWarmMs: 0.45,
  floorPacedMs: 1.1,
  jupyterMs: 5.7,
  floorFirstCellMs: 128,
  pythonPassMs: 52,
  shimMs: 80,
  trivialIdleMiB: 37,
};

const TARGET = {
  initRatio: 1.1,
  warmRatio: 1.3,
  jupyterFraction: 0.1,
  firstCellRatio: 1.2,
  idleServerMiB: 45,
  hundredCellsMiB: 75,
};

export interface Header {
  machine: string;
  bun: string;
  python: string;
  pythonVersion: string;
  pythonOnPath: string;
  binary: string;
  binaryBytes: number;
  /** The worker source the anatomy rows run alone. */
  workerScript: string;
  reference: string;
  referenceBytes: number;
  compileFlags: string;
  /** /proc/loadavg at the start and at the end: other work on the machine skews every figure. */
  loadBefore: string;
  loadAfter: string;
}

export interface Results {
  spawn: SpawnResult;
  firstCell: FirstCellResult;
  warm: WarmResult;
  rss: RssResult;
}

const ms = (samples: readonly number[]) => summarize(samples);
const verdict = (pass: boolean) => (pass ? "PASS" : "MISS");
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const about = (value: number, unit = " ms") => `≈ ${value}${unit}`;

function sum(parts: (number | undefined)[]): number | undefined {
  return parts.some((part) => part === undefined) ? undefined : parts.reduce((a = 0, b = 0) => a + b, 0);
}

function medianOf<T>(rows: T[], pick: (row: T) => number | undefined): number | undefined {
  const values = rows.map(pick).filter((value): value is number => value !== undefined);
  return values.length === 0 ? undefined : median(values);
}

function section(title: string, body: string, notes: string[] = []): string {
  return [`${title}`, body, ...notes.map((note) => `  ${note}`), ""].join("\n");
}

export function render(header: Header, results: Results, elapsedMs: number, leftovers: string[]): string {
  const out: string[] = [];
  out.push(
    "repl-mcp benchmark — every figure below was measured in this run, contenders interleaved",
    `  machine    ${header.machine}`,
    `  load avg   ${header.loadBefore} at start, ${header.loadAfter} at end (1, 5, 15 min)`,
    `  bun        ${header.bun}`,
    `  python     ${header.pythonVersion} at ${header.python} (python3 on PATH: ${header.pythonOnPath})`,
    `  repl-mcp   ${header.binary} (${mib(header.binaryBytes)}; run from a private copy)`,
    `  worker     ${header.workerScript} (run alone in the first-call anatomy)`,
    `  reference  ${header.reference} (${mib(header.referenceBytes)}), bun build ${header.compileFlags}`,
    "",
  );

  // 1. spawn → initialize
  const { spawn } = results;
  const replInit = ms(spawn.repl);
  const trivialInit = ms(spawn.trivial);
  const initRatio = replInit.median / trivialInit.median;
  out.push(
    section(
      `1. spawn → initialize answered (SDK Client over stdio; n=${replInit.n} each)`,
      table(
        ["contender", "median", "p90", "min", "design.md"],
        [
          ["repl-mcp", formatMs(replInit.median), formatMs(replInit.p90), formatMs(replInit.min), ""],
          [
            "trivial compiled SDK server",
            formatMs(trivialInit.median),
            formatMs(trivialInit.p90),
            formatMs(trivialInit.min),
            about(DESIGN.trivialInitMs),
          ],
          [
            "ratio repl-mcp / trivial",
            formatRatio(initRatio),
            formatRatio(replInit.p90 / trivialInit.p90),
            "",
            "",
          ],
        ],
      ),
    ),
  );

  // 2. warm round trips
  const { warm } = results;
  const b2b = (key: string) => ms(warm.backToBack[key] ?? []);
  const paced = (key: string) => ms(warm.paced[key] ?? []);
  const warmRow = (label: string, key: string, design = "") => {
    const a = b2b(key);
    const p = paced(key);
    return [
      label,
      formatMs(a.median),
      formatMs(a.p90),
      p.n ? formatMs(p.median) : "—",
      p.n ? formatMs(p.p90) : "—",
      design,
    ];
  };
  const warmRatio = b2b("repl").median / b2b("floor").median;
  const pacedRatio = paced("repl").median / paced("floor").median;
  out.push(
    section(
      `2. warm execute_python "1+1" round trip via the SDK Client ` +
        `(back-to-back n=${b2b("repl").n}, paced with 20 ms idle before each call n=${paced("repl").n})`,
      table(
        ["contender", "b2b median", "b2b p90", "paced median", "paced p90", "design.md (b2b / paced)"],
        [
          warmRow("repl-mcp execute_python", "repl"),
          warmRow(
            "composed floor execute_python",
            "floor",
            `${about(DESIGN.floorWarmMs)} / ${about(DESIGN.floorPacedMs)}`,
          ),
          warmRow("MCP floor (do-nothing tool)", "mcp"),
          warmRow("repl-mcp python_health (no Python)", "health"),
          [
            "ratio repl-mcp / composed floor",
            formatRatio(warmRatio),
            formatRatio(b2b("repl").p90 / b2b("floor").p90),
            formatRatio(pacedRatio),
            formatRatio(paced("repl").p90 / paced("floor").p90),
            "",
          ],
          [
            "repl-mcp − composed floor",
            formatMs(b2b("repl").median - b2b("floor").median),
            "",
            formatMs(paced("repl").median - paced("floor").median),
            "",
            "",
          ],
        ],
      ),
      [
        "python_health never touches Python: repl-mcp's own server path, comparable to the MCP floor's noop.",
        "The client does not call tools/list, so it skips output-schema validation for both contenders.",
      ],
    ),
  );

  // 3. first cell
  const { firstCell } = results;
  const total = (rows: { total: number }[]) => ms(rows.map((row) => row.total));
  const init = (rows: { init: number }[]) => ms(rows.map((row) => row.init));
  const firstCall = (rows: { total: number; init: number }[]) => ms(rows.map((row) => row.total - row.init));
  const cellRow = (label: string, rows: { total: number; init: number }[], design = "") => [
    label,
    formatMs(total(rows).median),
    formatMs(total(rows).p90),
    formatMs(init(rows).median),
    formatMs(firstCall(rows).median),
    design,
  ];
  const passRow = (label: string, samples: number[], design: string) => [
    label,
    formatMs(ms(samples).median),
    formatMs(ms(samples).p90),
    "",
    "",
    design,
  ];
  const firstRatio = total(firstCell.repl).median / total(firstCell.floor).median;
  const shimCost = ms(firstCell.pythonPassOnPath).median - ms(firstCell.pythonPass).median;
  out.push(
    section(
      `3. first cell: spawn → initialize → first execute_python "1+1" answered (n=${firstCell.repl.length} each)`,
      table(
        ["contender", "median", "p90", "initialize", "first call", "design.md"],
        [
          cellRow("repl-mcp --python <real interpreter>", firstCell.repl),
          cellRow("composed floor (same interpreter)", firstCell.floor, about(DESIGN.floorFirstCellMs)),
          passRow("python -c pass (real interpreter)", firstCell.pythonPass, about(DESIGN.pythonPassMs)),
          [
            "ratio repl-mcp / composed floor",
            formatRatio(firstRatio),
            formatRatio(total(firstCell.repl).p90 / total(firstCell.floor).p90),
            formatRatio(init(firstCell.repl).median / init(firstCell.floor).median),
            formatRatio(firstCall(firstCell.repl).median / firstCall(firstCell.floor).median),
            "",
          ],
          [
            "ratio repl-mcp / python -c pass",
            formatRatio(total(firstCell.repl).median / ms(firstCell.pythonPass).median),
            "",
            "",
            "",
            "",
          ],
        ],
      ),
      ['"initialize" is spawn → initialize answered; "first call" is the rest (worker start + the cell).'],
    ),
  );
  out.push(
    section(
      "   python3 from PATH instead (informational: a shim on PATH is outside repl-mcp's control)",
      table(
        ["contender", "median", "p90", "initialize", "first call", "design.md"],
        [
          passRow(`python3 -c pass via PATH (${header.pythonOnPath})`, firstCell.pythonPassOnPath, ""),
          ["shim cost (PATH − real interpreter)", formatMs(shimCost), "", "", "", `+${about(DESIGN.shimMs)}`],
          cellRow("repl-mcp without --python (python3 on PATH)", firstCell.replOnPath),
        ],
      ),
    ),
  );

  const alone = (samples: number[]) => ms(samples);
  const pieceRow = (label: string, samples: number[]) =>
    samples.length
      ? [label, formatMs(alone(samples).median), formatMs(alone(samples).p90)]
      : [label, "n/a", "n/a"];
  const workerSurplus = alone(firstCell.workerAlone).median - alone(firstCell.evalLoopAlone).median;
  const serial = alone(firstCell.guardian).median + alone(firstCell.workerAlone).median;
  out.push(
    section(
      "   where repl-mcp's first call goes: each piece started alone, in the same interleaved rounds",
      table(
        ["piece", "median", "p90"],
        [
          pieceRow(
            "guardian: spawn → exit when its lifeline closes (--internal-guardian)",
            firstCell.guardian,
          ),
          pieceRow("python worker.py: spawn → ready → exit at end of input", firstCell.workerAlone),
          pieceRow("python eval-loop.py: spawn → exit at end of input", firstCell.evalLoopAlone),
          pieceRow("python -c pass", firstCell.pythonPass),
          ["worker.py − eval-loop.py (the worker's own start-up)", formatMs(workerSurplus), ""],
          ["guardian + worker.py (they start one after the other)", formatMs(serial), ""],
          ["repl-mcp first call, measured above", formatMs(firstCall(firstCell.repl).median), ""],
          ["composed floor first call, measured above", formatMs(firstCall(firstCell.floor).median), ""],
        ],
      ),
    ),
  );

  // 4. resident memory
  const { rss } = results;
  const replParts = (rows: ReplRss[]) => [
    formatMiB(medianOf(rows, (row) => row.server)),
    formatMiB(medianOf(rows, (row) => row.guardian)),
    formatMiB(medianOf(rows, (row) => row.worker)),
    formatMiB(medianOf(rows, (row) => sum([row.server, row.guardian, row.worker]))),
  ];
  const floorParts = (rows: FloorRss[]) => [
    formatMiB(medianOf(rows, (row) => row.server)),
    "—",
    formatMiB(medianOf(rows, (row) => row.python)),
    formatMiB(medianOf(rows, (row) => sum([row.server, row.python]))),
  ];
  const idleRow = (label: string, samples: number[], design = "") => {
    const value = formatMiB(medianOf(samples, (x) => x));
    return [label, value, "—", "—", value, design];
  };
  const replIdle = medianOf(rss.replIdle, (x) => x) ?? Number.NaN;
  const trivialIdle = medianOf(rss.trivialIdle, (x) => x) ?? Number.NaN;
  const hundred = medianOf(rss.replHundredCells, (row) => sum([row.server, row.guardian, row.worker]));
  out.push(
    section(
      `4. resident memory (VmRSS from /proc; median of ${rss.replIdle.length} fresh instances each, 300 ms after the last call)`,
      table(
        ["state", "server", "guardian", "worker/python", "sum", "design.md"],
        [
          idleRow("repl-mcp idle, no Python (initialize + python_health)", rss.replIdle),
          idleRow(
            "trivial compiled server idle (initialize + noop)",
            rss.trivialIdle,
            about(DESIGN.trivialIdleMiB, " MiB"),
          ),
          idleRow("composed floor idle (initialize + noop)", rss.floorIdle),
          ["repl-mcp after 1 cell", ...replParts(rss.replOneCell), ""],
          ["composed floor after 1 cell", ...floorParts(rss.floorOneCell), ""],
          ["repl-mcp after 100 cells", ...replParts(rss.replHundredCells), ""],
          ["composed floor after 100 cells", ...floorParts(rss.floorHundredCells), ""],
          [`repl-mcp after the warm phase (${warm.after.cells} cells)`, ...replParts([warm.after.repl]), ""],
          [
            `composed floor after the warm phase (${warm.after.cells} cells)`,
            ...floorParts([warm.after.floor]),
            "",
          ],
        ],
      ),
      [`idle repl-mcp server / idle trivial server: ${formatRatio(replIdle / trivialIdle)}`],
    ),
  );

  // Targets
  const jupyterLimit = DESIGN.jupyterMs * TARGET.jupyterFraction;
  const rows: string[][] = [
    [
      `spawn → initialize ≤ ${TARGET.initRatio}× trivial compiled server`,
      `${formatRatio(initRatio)} (${formatMs(replInit.median)} vs ${formatMs(trivialInit.median)})`,
      verdict(initRatio <= TARGET.initRatio),
    ],
    [
      `warm round trip, back-to-back ≤ ${TARGET.warmRatio}× composed floor`,
      `${formatRatio(warmRatio)} (${formatMs(b2b("repl").median)} vs ${formatMs(b2b("floor").median)})`,
      verdict(warmRatio <= TARGET.warmRatio),
    ],
    [
      `warm round trip, paced ≤ ${TARGET.warmRatio}× composed floor`,
      `${formatRatio(pacedRatio)} (${formatMs(paced("repl").median)} vs ${formatMs(paced("floor").median)})`,
      verdict(pacedRatio <= TARGET.warmRatio),
    ],
    [
      `warm round trip ≤ ${TARGET.jupyterFraction}× Jupyter kernel (design.md's ${DESIGN.jupyterMs} ms, not run here)`,
      `${formatMs(b2b("repl").median)} vs ≤ ${formatMs(jupyterLimit)}`,
      verdict(b2b("repl").median <= jupyterLimit),
    ],
    [
      `first cell ≤ ${TARGET.firstCellRatio}× composed floor's first cell`,
      `${formatRatio(firstRatio)} (${formatMs(total(firstCell.repl).median)} vs ${formatMs(total(firstCell.floor).median)})`,
      verdict(firstRatio <= TARGET.firstCellRatio),
    ],
    [
      `idle server RSS, no Python ≤ ${TARGET.idleServerMiB} MiB`,
      `${formatMiB(replIdle)} (trivial server ${formatMiB(trivialIdle)}, ${formatRatio(replIdle / trivialIdle)})`,
      verdict(replIdle / 1024 <= TARGET.idleServerMiB),
    ],
    [
      `server + guardian + worker after 100 cells ≤ ${TARGET.hundredCellsMiB} MiB`,
      formatMiB(hundred),
      hundred === undefined ? "n/a" : verdict(hundred / 1024 <= TARGET.hundredCellsMiB),
    ],
    [
      "output flood (200 MB cell): bounded, RSS growth ≤ 5 MiB, ≤ 2× floor",
      "section 5, bench/flood-and-bridge.ts",
      "—",
    ],
    ["mcp.call to a stdio peer ≤ 2× SDK client direct", "section 6, bench/flood-and-bridge.ts", "—"],
  ];
  out.push(section('Targets (design.md, "Performance targets")', table(["target", "measured", ""], rows)));

  if (leftovers.length > 0) {
    out.push(section("Processes that outlived a clean stop (killed by the benchmark)", leftovers.join("\n")));
  }
  out.push(`Total benchmark time ${(elapsedMs / 1000).toFixed(1)} s.`);
  return out.join("\n");
}
