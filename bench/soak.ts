// The soak run (`npm run soak`; not part of CI's pass/fail): one server driven through thousands of
// cells, resets, session open/close cycles, brokered calls, artifact round trips and cells that each
// return a plot. It prints the server's RSS, its open descriptors and the size of its process tree at
// the start, after each phase and at the end, so growth shows as a trend, and compares the RSS after
// the plots with the RSS after the plain cells (target: at most 1.3×). SOAK_SCALE (default 1) shrinks
// or stretches every count.
import { mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type Served, start, stopAll, textOf } from "./lib/mcp.ts";
import { processTree, rssKiB } from "./lib/proc.ts";
import { cleanEnv } from "./lib/spawn.ts";
import { table } from "./lib/table.ts";

const ROOT = resolve(import.meta.dir, "..");
const BINARY = process.env.REPL_MCP_BINARY ?? join(ROOT, "dist/repl-mcp");
const PEER = join(ROOT, "tests/fixtures/peers/stdio-peer.ts");
const SCALE = Number(process.env.SOAK_SCALE ?? 1);
/** An interpreter with matplotlib for the plot phase (Debian's python3-matplotlib on CI). */
const PLOT_PYTHON = process.env.SOAK_PLOT_PYTHON ?? "/usr/bin/python3";
/** A plot of noise, about 300 KB of PNG: 64 retained runs of it would hold 26 MB of base64. */
const PLOT_CELL = (i: number) =>
  `random.seed(${i})\nplt.figure(figsize=(4, 4))\n` +
  "plt.imshow([[random.random() for _ in range(300)] for _ in range(300)])\nNone";
const PLOT_RSS_TARGET = 1.3;
const count = (n: number) => Math.max(1, Math.round(n * SCALE));

interface Sample {
  label: string;
  rssKiB: number;
  fds: number;
  processes: number;
  ms: number;
  /** At a phase's end: the highest RSS seen during the phase (read every 10 steps). */
  peakKiB?: number;
}

const samples: Sample[] = [];
const began = performance.now();

function sample(served: Served, label: string, peakKiB?: number): void {
  const pid = served.pid;
  const rss = rssKiB(pid) ?? Number.NaN;
  samples.push({
    label,
    rssKiB: rss,
    fds: readdirSync(`/proc/${pid}/fd`).length,
    processes: processTree(pid).length,
    ms: performance.now() - began,
    peakKiB: peakKiB === undefined ? undefined : Math.max(peakKiB, rss),
  });
  const last = samples.at(-1) as Sample;
  console.error(
    `[soak] ${label}: rss ${(last.rssKiB / 1024).toFixed(1)} MiB, fds ${last.fds}, processes ${last.processes}`,
  );
}

async function cell(served: Served, code: string, args: Record<string, unknown> = {}) {
  const result = await served.call("execute_python", { code, ...args });
  return result.structuredContent as Record<string, any>;
}

async function phase(served: Served, label: string, n: number, step: (i: number) => Promise<void>) {
  let peak = 0;
  for (let i = 0; i < n; i++) {
    await step(i);
    if (i % 10 === 0) peak = Math.max(peak, rssKiB(served.pid) ?? 0);
    if (i === Math.floor(n / 2)) sample(served, `${label} (middle)`);
  }
  sample(served, `${label} (end, ${n})`, peak);
}

/** 1,000 cells that each return a plot, in a session of an interpreter that has matplotlib. */
async function plots(served: Served, project: string): Promise<void> {
  const probe = Bun.spawnSync([PLOT_PYTHON, "-c", "import matplotlib"], { stderr: "ignore" });
  if (probe.exitCode !== 0) {
    console.error(`[soak] plots skipped: ${PLOT_PYTHON} cannot import matplotlib (set SOAK_PLOT_PYTHON)`);
    return;
  }
  const opened = await served.call("python_session_open", { name: "plots", project, python: PLOT_PYTHON });
  const session_id = (opened.structuredContent as { session_id: string }).session_id;
  await cell(served, "import random, matplotlib.pyplot as plt", { session_id });
  const runs: string[] = [];
  await phase(served, "plots", count(1_000), async (i) => {
    const result = await served.call("execute_python", { code: PLOT_CELL(i), session_id });
    if (!result.content.some((block) => block.type === "image"))
      throw new Error(`plot ${i} returned no picture: ${textOf(result).slice(0, 300)}`);
    runs.push((result.structuredContent as { run_id: string }).run_id);
  });
  // The oldest run still in the history only lists its picture; every run keeps a trace of it.
  const run_id = runs[Math.max(0, runs.length - 64)];
  const oldest = (await served.call("python_run", { session_id, run_id })).structuredContent as {
    displays?: Array<{ archived?: boolean; artifact?: { id: string } }>;
  };
  const display = oldest.displays?.[0];
  if (runs.length > 64 && !(display?.archived && display.artifact === undefined))
    throw new Error(`the oldest plot is not archived and let go: ${JSON.stringify(display)}`);
  await served.call("python_session_close", { session_id });
}

function plotVerdict(): string | undefined {
  const plain = samples.find((s) => s.label.startsWith("cells (end"));
  const plotted = samples.find((s) => s.label.startsWith("plots (end"));
  if (!plain || !plotted) return undefined;
  const ratio = plotted.rssKiB / plain.rssKiB;
  const peaks = (plotted.peakKiB ?? Number.NaN) / (plain.peakKiB ?? Number.NaN);
  const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;
  const verdict = ratio <= PLOT_RSS_TARGET ? "PASS" : "MISS";
  return (
    `server RSS after the plots ${mib(plotted.rssKiB)} / after the plain cells ${mib(plain.rssKiB)} = ` +
    `${ratio.toFixed(2)}× (target ≤ ${PLOT_RSS_TARGET}×) ${verdict}; highest during each phase ` +
    `${mib(plotted.peakKiB ?? Number.NaN)} / ${mib(plain.peakKiB ?? Number.NaN)} = ${peaks.toFixed(2)}×`
  );
}

async function main(): Promise<void> {
  const project = realpathSync(mkdtempSync(join(tmpdir(), "repl-mcp-soak-")));
  writeFileSync(
    join(project, ".mcp.json"),
    JSON.stringify({ mcpServers: { peer: { command: process.execPath, args: [PEER] } } }),
  );
  const { served } = await start({
    label: "repl-mcp",
    command: BINARY,
    args: [],
    env: cleanEnv(),
    cwd: project,
  });
  try {
    await cell(served, "1");
    sample(served, "start (one cell run)");

    await phase(served, "cells", count(10_000), async (i) => {
      await cell(served, `x${i % 100} = ${i}\nx${i % 100} * 2`);
    });
    // Right after the plain cells, so the comparison of the two is about the pictures alone: later
    // phases raise the RSS on their own (the brokered calls by 20 to 40 MiB in our runs).
    await plots(served, project);
    await phase(served, "resets", count(500), async () => {
      await cell(served, "1", { reset: true });
    });
    await phase(served, "session open/close", count(200), async (i) => {
      const opened = await served.call("python_session_open", { name: `s${i}`, project });
      const id = (opened.structuredContent as { session_id: string }).session_id;
      await cell(served, "2 + 2", { session_id: id });
      await served.call("python_session_close", { session_id: id });
    });
    await phase(served, "mcp.call", count(1_000), async (i) => {
      const out = await cell(served, `mcp.text(mcp.call('peer', 'echo', arguments={'text': 'n${i}'}))`);
      if (out.value !== `n${i}`) throw new Error(`mcp.call ${i} returned ${JSON.stringify(out)}`);
    });
    const { tools } = await served.client.listTools();
    if (tools.some((tool) => tool.name === "artifact_read")) {
      await phase(served, "artifact round trips", count(500), async (i) => {
        const made = await cell(served, `artifact('r${i}-' + 'a' * 20000, format='text')`);
        const id = made.value?.id;
        if (!id) throw new Error(`artifact() returned ${JSON.stringify(made).slice(0, 300)}`);
        const read = await served.call("artifact_read", {
          session_id: made.session_id,
          id,
          offset: 0,
          length: 16,
        });
        if (!textOf(read).includes(`r${i}-`))
          throw new Error(`artifact_read ${i}: ${textOf(read).slice(0, 200)}`);
        await served.call("artifact_delete", { session_id: made.session_id, id });
      });
    } else console.error("[soak] artifact round trips skipped: this build has no artifact tools");
  } finally {
    await stopAll();
    rmSync(project, { recursive: true, force: true });
  }

  const first = samples[0] as Sample;
  console.log(
    table(
      ["point", "server RSS", "phase peak", "Δ RSS vs start", "open fds", "processes", "elapsed"],
      samples.map((s) => [
        s.label,
        `${(s.rssKiB / 1024).toFixed(1)} MiB`,
        s.peakKiB === undefined ? "" : `${(s.peakKiB / 1024).toFixed(1)} MiB`,
        `${((s.rssKiB - first.rssKiB) / 1024).toFixed(1)} MiB`,
        String(s.fds),
        String(s.processes),
        `${(s.ms / 1000).toFixed(1)} s`,
      ]),
    ),
  );
  const verdict = plotVerdict();
  if (verdict) console.log(verdict);
}

await main();
