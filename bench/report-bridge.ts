// Sections 7 and 8 of the report: the 200 MB output flood, and mcp.call against the floor bridge and a
// direct SDK call, with where one call's time and CPU go.
import type { BridgeKey, BridgeResult, CallPhases, ProcessCall } from "./bridge.ts";
import type { FloodResult } from "./flood.ts";
import { formatMiB, formatMs, formatRatio, median, percentile } from "./lib/stats.ts";
import { table } from "./lib/table.ts";
import { TARGET } from "./report-targets.ts";

const section = (title: string, body: string, notes: string[] = []) =>
  [title, body, ...notes.map((note) => `  ${note}`), ""].join("\n");

export function floodSection(flood: FloodResult): string {
  const { times } = flood;
  const floor = median(times.floor);
  const row = (label: string, samples: number[], growth = "") => [
    label,
    formatMs(median(samples)),
    formatRatio(median(samples) / floor),
    growth,
  ];
  return section(
    `7. a cell printing 200 MB (2,000,000 lines of 100 bytes), median of ${times.repl.length} interleaved rounds`,
    table(
      ["contender", "median", "vs composed floor", "server peak RSS growth"],
      [
        row(
          `repl-mcp execute_python (stdout kept: ${flood.keptBytes.repl} bytes)`,
          times.repl,
          formatMiB(flood.growthKiB.repl),
        ),
        row(
          `repl-mcp 1.x execute_python (stdout kept: ${flood.keptBytes.old} bytes)`,
          times.old,
          formatMiB(flood.growthKiB.old),
        ),
        row("composed floor, bounded to 50,000 characters", times.floor),
        row("python3 -c ... > /dev/null (whole process)", times.devnull),
      ],
    ),
  );
}

const LABELS: Record<BridgeKey, string> = {
  repl: "repl-mcp: mcp.call from a cell (worker → server → peer)",
  old: "repl-mcp 1.x: mcp.call from a cell",
  floor: "floor bridge: call() from a cell → minimal Bun server → SDK client → peer",
  direct: "SDK client in the benchmark calling the peer directly",
};

const PHASES: [keyof CallPhases, string][] = [
  ["outbound", "cell: the call begins → its request goes to the writer"],
  ["toPeer", "→ the peer has it (encode, write, server before dispatch, 2 pipe hops)"],
  ["peer", "the peer: request → response handed to its transport"],
  ["back", "handed over → the worker has the answer (server's return path, 2 pipe hops)"],
  ["inbound", "the worker has the answer → the call returns in the cell"],
  ["total", "the whole call (median of the per-call totals)"],
];

/** The median over rounds of one round's block median against the floor bridge's in the same round. */
export function pairedRatio(blockMedians: BridgeResult["blockMedians"], key: BridgeKey): number {
  return median(blockMedians[key].map((value, round) => value / (blockMedians.floor[round] as number)));
}

export function bridgeSection(bridge: BridgeResult): string {
  const { samples, blockMedians, phases, cpu } = bridge;
  const floor = median(samples.floor);
  const direct = median(samples.direct);
  const ratio = median(samples.repl) / floor;
  const timing = table(
    ["contender", "median", "p90", "vs floor bridge", "vs direct"],
    (Object.keys(LABELS) as BridgeKey[]).map((key) => [
      LABELS[key],
      formatMs(median(samples[key])),
      formatMs(percentile(samples[key], 0.9)),
      formatRatio(median(samples[key]) / floor),
      formatRatio(median(samples[key]) / direct),
    ]),
  );
  const phase = (key: "repl" | "old" | "floor", name: keyof CallPhases) =>
    median(phases[key].map((call) => call[name]));
  const phaseTable = table(
    ["phase (median per call)", "repl-mcp", "repl-mcp 1.x", "floor bridge", "repl-mcp − floor"],
    PHASES.map(([name, label]) => [
      label,
      formatMs(phase("repl", name)),
      formatMs(phase("old", name)),
      formatMs(phase("floor", name)),
      formatMs(phase("repl", name) - phase("floor", name)),
    ]),
  );
  const roles = [...new Set(Object.values(cpu).flatMap((processes) => processes.map((p) => p.role)))];
  const cpuOf = (processes: ProcessCall[], role?: string) =>
    processes.filter((p) => role === undefined || p.role === role).reduce((sum, p) => sum + p.cpuUs, 0);
  const wakeupsOf = (processes: ProcessCall[], role: string) =>
    processes.filter((p) => p.role === role).reduce((sum, p) => sum + p.wakeups, 0);
  const keys = Object.keys(LABELS) as BridgeKey[];
  const cpuTable = table(
    ["process", "repl-mcp", "repl-mcp 1.x", "floor bridge", "direct"],
    [
      ...roles.map((role) => [
        role,
        ...keys.map((key) =>
          cpu[key].some((p) => p.role === role)
            ? `${cpuOf(cpu[key], role).toFixed(0)} µs, ${wakeupsOf(cpu[key], role).toFixed(2)} wake-ups`
            : "—",
        ),
      ]),
      ["all of them", ...keys.map((key) => `${cpuOf(cpu[key]).toFixed(0)} µs`)],
    ],
  );
  return [
    section(
      `8. one tools/call to a stdio peer (echo), ${samples.repl.length} calls per contender in interleaved blocks`,
      timing,
      [
        `target: mcp.call ≤ ${TARGET.bridgeRatio}× the floor bridge → ${formatRatio(ratio)} ${ratio <= TARGET.bridgeRatio ? "PASS" : "MISS"}`,
        `Paired per round (the median of each round's repl-mcp block / floor block): ${formatRatio(pairedRatio(blockMedians, "repl"))};`,
        `the 1.x build's: ${formatRatio(pairedRatio(blockMedians, "old"))}. Rounds ran ${blockMedians.repl.length} times, ${samples.repl.length / blockMedians.repl.length} calls a block.`,
      ],
    ),
    section(
      `   where one call goes (${phases.repl.length} traced calls each; CLOCK_MONOTONIC stamps in the cell, the worker and the peer)`,
      phaseTable,
      [
        "The worker is stamped as its request frame reaches the writer and in its rpc_result handler; the eval",
        "loop at the same two points. Phases are medians of their own, so they need not add up to the total.",
      ],
    ),
    section("   CPU per call, per process (schedstat, a run of calls of its own)", cpuTable, [
      "The direct client's CPU is this benchmark process's; it also runs the timers of the benchmark itself.",
    ]),
  ].join("\n");
}
