// The soak run (`npm run soak`; not part of CI's pass/fail): one server driven through thousands of
// cells, resets, session open/close cycles, brokered calls and artifact round trips. It prints the
// server's RSS, its open descriptors and the size of its process tree at the start, after each phase
// and at the end, so growth shows as a trend. SOAK_SCALE (default 1) shrinks or stretches every count.
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
const count = (n: number) => Math.max(1, Math.round(n * SCALE));

interface Sample {
  label: string;
  rssKiB: number;
  fds: number;
  processes: number;
  ms: number;
}

const samples: Sample[] = [];
const began = performance.now();

function sample(served: Served, label: string): void {
  const pid = served.pid;
  samples.push({
    label,
    rssKiB: rssKiB(pid) ?? Number.NaN,
    fds: readdirSync(`/proc/${pid}/fd`).length,
    processes: processTree(pid).length,
    ms: performance.now() - began,
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
  for (let i = 0; i < n; i++) {
    await step(i);
    if (i === Math.floor(n / 2)) sample(served, `${label} (middle)`);
  }
  sample(served, `${label} (end, ${n})`);
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
      ["point", "server RSS", "Δ RSS vs start", "open fds", "processes", "elapsed"],
      samples.map((s) => [
        s.label,
        `${(s.rssKiB / 1024).toFixed(1)} MiB`,
        `${((s.rssKiB - first.rssKiB) / 1024).toFixed(1)} MiB`,
        String(s.fds),
        String(s.processes),
        `${(s.ms / 1000).toFixed(1)} s`,
      ]),
    ),
  );
}

await main();
