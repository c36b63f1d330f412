// Turns the measurements into the printed report: one table per measurement, then the targets of
// design.md ("Performance targets") next to the measured ratios. Misses are reported, never fatal.

import type { TreeMemory } from "./lib/proc.ts";
import { formatMiB, formatMs, formatRatio, median, summarize } from "./lib/stats.ts";
import { table } from "./lib/table.ts";
import type {
  FirstCellResult,
  FloorMemory,
  MemoryResult,
  ProcessCpu,
  ProcessMemory,
  ReplMemory,
  WarmResult,
} from "./phases.ts";
import { bridgeSection, floodSection } from "./report-bridge.ts";
import { targets, versusOld } from "./report-targets.ts";
import type { Results } from "./results.ts";
import {
  EXTRA_SESSIONS,
  type GrowthResult,
  HISTORY_RUNS,
  NAMESPACE_VARIABLES,
  type SessionsResult,
} from "./scaling.ts";

/** Figures design.md reports for this machine, printed beside ours as a sanity check. */
const DESIGN = {
  trivialInitMs: 70,
  floorWarmMs: 0.45,
  floorPacedMs: 1.1,
  floorFirstCellMs: 128,
  pythonPassMs: 52,
  shimMs: 80,
  trivialIdleMiB: 37,
};

export interface Header {
  machine: string;
  bun: string;
  python: string;
  pythonVersion: string;
  pythonOnPath: string;
  binary: string;
  binaryBytes: number;
  /** The 1.x build: where it came from, and its size. */
  oldBuild: string;
  oldBinary: string;
  oldBinaryBytes: number;
  /** The worker source the anatomy rows run alone. */
  workerScript: string;
  reference: string;
  referenceBytes: number;
  compileFlags: string;
  /** /proc/loadavg at the start and at the end: other work on the machine skews every figure. */
  loadBefore: string;
  loadAfter: string;
}

const ms = (samples: readonly number[]) => summarize(samples);
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const about = (value: number, unit = " ms") => `≈ ${value}${unit}`;

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
    `  1.x build  ${header.oldBinary} (${mib(header.oldBinaryBytes)}), ${header.oldBuild}`,
    `  worker     ${header.workerScript} (run alone in the first-call anatomy)`,
    `  reference  ${header.reference} (${mib(header.referenceBytes)}), bun build ${header.compileFlags}`,
    "",
  );

  // 1. spawn → initialize
  const { spawn } = results;
  const replInit = ms(spawn.repl);
  const oldInit = ms(spawn.old);
  const trivialInit = ms(spawn.trivial);
  const initRatio = replInit.median / trivialInit.median;
  out.push(
    section(
      `1. spawn → initialize answered (SDK Client over stdio; n=${replInit.n} each)`,
      table(
        ["contender", "median", "p90", "min", "design.md"],
        [
          ["repl-mcp", formatMs(replInit.median), formatMs(replInit.p90), formatMs(replInit.min), ""],
          ["repl-mcp 1.x", formatMs(oldInit.median), formatMs(oldInit.p90), formatMs(oldInit.min), ""],
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
          [
            "ratio repl-mcp 1.x / trivial",
            formatRatio(oldInit.median / trivialInit.median),
            formatRatio(oldInit.p90 / trivialInit.p90),
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
  const ratioRow = (label: string, key: string) => [
    label,
    formatRatio(b2b(key).median / b2b("floor").median),
    formatRatio(b2b(key).p90 / b2b("floor").p90),
    formatRatio(paced(key).median / paced("floor").median),
    formatRatio(paced(key).p90 / paced("floor").p90),
    "",
  ];
  out.push(
    section(
      `2. warm execute_python "1+1" round trip via the SDK Client ` +
        `(back-to-back n=${b2b("repl").n}, paced with 20 ms idle before each call n=${paced("repl").n})`,
      table(
        ["contender", "b2b median", "b2b p90", "paced median", "paced p90", "design.md (b2b / paced)"],
        [
          warmRow("repl-mcp execute_python", "repl"),
          warmRow("repl-mcp 1.x execute_python", "old"),
          warmRow(
            "composed floor execute_python",
            "floor",
            `${about(DESIGN.floorWarmMs)} / ${about(DESIGN.floorPacedMs)}`,
          ),
          warmRow("MCP floor (do-nothing tool)", "mcp"),
          warmRow("repl-mcp python_health (no Python)", "health"),
          warmRow("repl-mcp 1.x python_health", "oldHealth"),
          warmRow("worker.py alone (execute → result frame over pipes)", "worker"),
          warmRow("eval-loop.py alone (request → reply over pipes)", "evalLoop"),
          ratioRow("ratio repl-mcp / composed floor", "repl"),
          ratioRow("ratio repl-mcp 1.x / composed floor", "old"),
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
  out.push(warmPhases(b2b, paced));
  out.push(cpuSection(warm));

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
  const shimCost = ms(firstCell.pythonPassOnPath).median - ms(firstCell.pythonPass).median;
  out.push(
    section(
      `3. first cell: spawn → initialize → first execute_python "1+1" answered (n=${firstCell.repl.length} each)`,
      table(
        ["contender", "median", "p90", "initialize", "first call", "design.md"],
        [
          cellRow("repl-mcp --python <real interpreter>", firstCell.repl),
          cellRow("repl-mcp 1.x --python <real interpreter>", firstCell.old),
          cellRow("composed floor (same interpreter)", firstCell.floor, about(DESIGN.floorFirstCellMs)),
          passRow("python -c pass (real interpreter)", firstCell.pythonPass, about(DESIGN.pythonPassMs)),
          ...(["repl", "old"] as const).map((key) => [
            `ratio repl-mcp${key === "old" ? " 1.x" : ""} / composed floor`,
            formatRatio(total(firstCell[key]).median / total(firstCell.floor).median),
            formatRatio(total(firstCell[key]).p90 / total(firstCell.floor).p90),
            formatRatio(init(firstCell[key]).median / init(firstCell.floor).median),
            formatRatio(firstCall(firstCell[key]).median / firstCall(firstCell.floor).median),
            "",
          ]),
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

  out.push(firstCellPhases(firstCell));
  const { memory } = results;
  out.push(memorySection(memory, warm));
  out.push(scalingSection(results.sessions, results.growth));

  out.push(floodSection(results.flood));
  out.push(bridgeSection(results.bridge));
  out.push(versusOld(results, header.oldBuild));
  out.push(targets(results));

  if (leftovers.length > 0) {
    out.push(section("Processes that outlived a clean stop (killed by the benchmark)", leftovers.join("\n")));
  }
  out.push(`Total benchmark time ${(elapsedMs / 1000).toFixed(1)} s.`);
  return out.join("\n");
}

type Samples = (key: string) => { median: number; n: number };

/**
 * One warm cell split into phases. The transport (SDK client ↔ a compiled SDK server) is the MCP floor's
 * noop; the Python side is each program driven alone over pipes; what is left is the server's own work
 * (parsing, routing, frames to and from Python, building the result), inferred as the remainder.
 */
function warmPhases(b2b: Samples, paced: Samples): string {
  const phase = (repl: number, floor: number) => [formatMs(repl), formatMs(floor), formatMs(repl - floor)];
  const rows: string[][] = [];
  for (const [label, pick] of [
    ["back-to-back", b2b],
    ["paced", paced],
  ] as const) {
    const transport = pick("mcp").median;
    const worker = pick("worker").median;
    const evalLoop = pick("evalLoop").median;
    const repl = pick("repl").median;
    const floor = pick("floor").median;
    rows.push(
      [`${label}: client ↔ server transport and SDK (MCP floor noop)`, ...phase(transport, transport)],
      [`${label}: Python side alone (worker.py / eval-loop.py)`, ...phase(worker, evalLoop)],
      [
        `${label}: server's own path, to Python and back (remainder)`,
        ...phase(repl - transport - worker, floor - transport - evalLoop),
      ],
      [`${label}: total execute_python`, ...phase(repl, floor)],
    );
  }
  const health = b2b("health").median - b2b("mcp").median;
  return section(
    "   where one warm cell goes (medians of the rows above)",
    table(["phase", "repl-mcp", "composed floor", "difference"], rows),
    [
      `repl-mcp's server path for a tool that never touches Python (python_health − noop): ${formatMs(health)}.`,
      "The remainder includes the pipe hops and scheduling the lone drivers also pay, so it is a floor-",
      "relative figure: compare its two columns, not its absolute value.",
    ],
  );
}

function firstCellPhases(firstCell: FirstCellResult): string {
  const median = (samples: number[]) => summarize(samples).median;
  const init = median(firstCell.repl.map((row) => row.init));
  const floorInit = median(firstCell.floor.map((row) => row.init));
  const replCall = median(firstCell.repl.map((row) => row.total - row.init));
  const floorCall = median(firstCell.floor.map((row) => row.total - row.init));
  const guardian = median(firstCell.guardian);
  const ready = median(firstCell.workerAlone.map((row) => row.ready));
  const cell = median(firstCell.workerAlone.map((row) => row.cell));
  const evalLoop = median(firstCell.evalLoopAlone);
  const pass = median(firstCell.pythonPass);
  const rows = [
    ["spawn → initialize answered", formatMs(init), formatMs(floorInit)],
    ["guardian: spawn → exit on lifeline EOF (alone)", formatMs(guardian), "—"],
    ["python -c pass (the interpreter's own start)", formatMs(pass), formatMs(pass)],
    ["Python program: spawn → ready (alone, minus python -c pass)", formatMs(ready - pass), "—"],
    [
      "Python program: first 1+1 (alone; eval loop: spawn → reply − pass)",
      formatMs(cell),
      formatMs(evalLoop - pass),
    ],
    [
      "server's own path, worker launch included (remainder of the first call)",
      formatMs(replCall - guardian - ready - cell),
      formatMs(floorCall - evalLoop),
    ],
    ["spawn → first result", formatMs(init + replCall), formatMs(floorInit + floorCall)],
  ];
  return section(
    "   where the first cell goes (medians; pieces run alone in the same interleaved rounds)",
    table(["phase", "repl-mcp", "composed floor"], rows),
    ["The guardian and the worker start one after the other, so both lie on the first cell's path."],
  );
}

const pssOf = (part: ProcessMemory) => formatMiB(part.pss);
const rssOf = (part: ProcessMemory) => formatMiB(part.rss);

function memorySection(memory: MemoryResult, warm: WarmResult): string {
  const median = <T>(rows: T[], pick: (row: T) => number | undefined) => formatMiB(medianOf(rows, pick));
  const replRow = (label: string, rows: ReplMemory[]) => [
    label,
    median(rows, (row) => row.server.pss),
    median(rows, (row) => row.guardian.pss),
    median(rows, (row) => row.worker.pss),
    median(rows, (row) => row.tree.pss),
    median(rows, (row) => row.tree.rss),
  ];
  const floorRow = (label: string, rows: FloorMemory[]) => [
    label,
    median(rows, (row) => row.server.pss),
    "—",
    median(rows, (row) => row.python.pss),
    median(rows, (row) => row.tree.pss),
    median(rows, (row) => row.tree.rss),
  ];
  const idleRow = (label: string, rows: TreeMemory[], design = "") => [
    label,
    median(rows, (row) => row.pss),
    "—",
    "—",
    median(rows, (row) => row.pss),
    median(rows, (row) => row.rss),
    design,
  ];
  const rows = [
    idleRow("repl-mcp idle, no Python (initialize + python_health)", memory.replIdle),
    idleRow("repl-mcp 1.x idle, no Python", memory.oldIdle),
    idleRow(
      "trivial compiled server idle (initialize + noop)",
      memory.trivialIdle,
      about(DESIGN.trivialIdleMiB, " MiB RSS"),
    ),
    idleRow("composed floor idle (initialize + noop)", memory.floorIdle),
    replRow("repl-mcp after 1 cell", memory.replOneCell),
    replRow("repl-mcp 1.x after 1 cell", memory.oldOneCell),
    floorRow("composed floor after 1 cell", memory.floorOneCell),
    replRow("repl-mcp after 100 cells", memory.replHundredCells),
    replRow("repl-mcp 1.x after 100 cells", memory.oldHundredCells),
    floorRow("composed floor after 100 cells", memory.floorHundredCells),
    replRow(`repl-mcp after the warm phase (${warm.after.cells} cells)`, [warm.after.repl]),
    replRow(`repl-mcp 1.x after the warm phase (${warm.after.cells} cells)`, [warm.after.old]),
    floorRow(`composed floor after the warm phase (${warm.after.cells} cells)`, [warm.after.floor]),
  ];
  const { repl } = warm.after;
  return section(
    `4. memory: PSS (Pss of /proc/<pid>/smaps_rollup) per process and summed over the tree; tree RSS beside it (median of ${memory.replIdle.length} fresh instances each, 300 ms after the last call)`,
    table(
      ["state", "server PSS", "guardian PSS", "worker/python PSS", "tree PSS", "tree RSS", "design.md"],
      rows,
    ),
    [
      "RSS counts the pages the server and the guardian share (the same binary) once per process; PSS splits them.",
      `After the warm phase, RSS per process: server ${rssOf(repl.server)}, guardian ${rssOf(repl.guardian)}, ` +
        `worker ${rssOf(repl.worker)}; PSS: ${pssOf(repl.server)}, ${pssOf(repl.guardian)}, ${pssOf(repl.worker)}.`,
    ],
  );
}

function scalingSection(sessions: SessionsResult, growth: GrowthResult): string {
  const per = (rows: { before: TreeMemory; after: TreeMemory }[], pick: (tree: TreeMemory) => number) =>
    medianOf(rows, (row) => (pick(row.after) - pick(row.before)) / EXTRA_SESSIONS) ?? Number.NaN;
  const floorPss = per(sessions.floor, (tree) => tree.pss);
  const sessionRow = (label: string, rows: { before: TreeMemory; after: TreeMemory }[]) => [
    label,
    formatMiB(per(rows, (tree) => tree.pss)),
    formatMiB(per(rows, (tree) => tree.rss)),
    `${formatMiB(medianOf(rows, (row) => row.before.pss))} → ${formatMiB(medianOf(rows, (row) => row.after.pss))}`,
  ];
  const memoryTable = table(
    ["contender", "PSS per extra", "RSS per extra", "tree PSS before → after"],
    [
      sessionRow(`repl-mcp: ${EXTRA_SESSIONS} more sessions, one cell each`, sessions.repl),
      sessionRow(`repl-mcp 1.x: ${EXTRA_SESSIONS} more sessions, one cell each`, sessions.old),
      sessionRow(`composed floor: ${EXTRA_SESSIONS} more eval loops, one cell each`, sessions.floor),
      ["ratio repl-mcp / floor", formatRatio(per(sessions.repl, (tree) => tree.pss) / floorPss), "", ""],
      ["ratio repl-mcp 1.x / floor", formatRatio(per(sessions.old, (tree) => tree.pss) / floorPss), "", ""],
    ],
  );
  const timing = (key: keyof GrowthResult["samples"], label: string) => {
    const summary = summarize(growth.samples[key]);
    return [
      label,
      formatMs(summary.median),
      formatMs(summary.p90),
      formatRatio(summary.median / median(growth.samples.small)),
      `${growth.cpuUs[key].toFixed(0)} µs`,
      formatRatio(growth.cpuUs[key] / growth.cpuUs.small),
      formatMiB(growth.memory[key].pss),
    ];
  };
  const growthTable = table(
    ["server", "1+1 median", "p90", "vs small", "tree CPU per call", "vs small", "tree PSS"],
    [
      timing("small", "small (one variable)"),
      timing("namespace", `namespace of ${NAMESPACE_VARIABLES.toLocaleString("en")} variables`),
      timing("history", `history of ${HISTORY_RUNS} runs with 50 kB stdout and a 20 kB value each`),
    ],
  );
  return [
    section(
      `5. each extra session with a live worker (median of ${sessions.repl.length} rounds)`,
      memoryTable,
    ),
    section(
      `6. cost of a trivial cell as the state grows (back-to-back, n=${growth.samples.small.length} each, interleaved)`,
      growthTable,
      [
        "The full-history server is refilled between timed blocks (the timed cells push old runs out), then",
        "left alone for a moment. Every server first gets the same warm-up. The target takes the larger of",
        "the wall and the CPU ratio; CPU per call is the steadier one on a loaded machine.",
      ],
    ),
  ].join("\n");
}

/** CPU per call is what the load of a shared machine does not change much: the attribution to trust. */
function cpuSection(warm: WarmResult): string {
  const row = (label: string, processes: ProcessCpu[], names: string[]) =>
    processes.map((process, index) => [
      `${label}: ${names[index] ?? "descendant"} (pid ${process.pid})`,
      `${process.cpuUs.toFixed(0)} µs`,
      process.wakeups.toFixed(2),
    ]);
  const total = (processes: ProcessCpu[]) => processes.reduce((sum, process) => sum + process.cpuUs, 0);
  const rows = [
    ...row("repl-mcp", warm.cpu.repl, ["server", "guardian", "worker"]),
    ["repl-mcp: whole tree", `${total(warm.cpu.repl).toFixed(0)} µs`, ""],
    ...row("repl-mcp 1.x", warm.cpu.old, ["server", "guardian", "worker"]),
    ["repl-mcp 1.x: whole tree", `${total(warm.cpu.old).toFixed(0)} µs`, ""],
    ...row("composed floor", warm.cpu.floor, ["server", "eval loop"]),
    ["composed floor: whole tree", `${total(warm.cpu.floor).toFixed(0)} µs`, ""],
    ...row("alone", warm.cpu.worker, ["worker.py"]),
    ...row("alone", warm.cpu.evalLoop, ["eval-loop.py"]),
  ];
  return section(
    "   CPU per warm 1+1 call, per process (schedstat over all threads; a run of calls of its own)",
    table(["process", "CPU per call", "wake-ups per call"], rows),
    [
      `repl-mcp tree / composed floor tree: ${formatRatio(total(warm.cpu.repl) / total(warm.cpu.floor))}, ` +
        `1.x tree / composed floor tree: ${formatRatio(total(warm.cpu.old) / total(warm.cpu.floor))}. ` +
        "CPU time barely depends on the machine's load, wall time does.",
    ],
  );
}
