// `npm run bench` (after bench/run.ts): what the viewer (--viewer) costs, measured side by side in one run.
// The same binary twice, one server without the viewer and one with it and a page receiving its event
// stream (a reader that consumes every event as a browser tab would): warm `1+1` round trips in
// alternating blocks, then the 200 MB output flood with the server's RSS growth and the bytes the page got.
//
//   bun run bench/viewer.ts            (REPL_MCP_BINARY overrides dist/repl-mcp)
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { FLOOD_CODE } from "./flood.ts";
import { type Served, start, stopAll } from "./lib/mcp.ts";
import { rssKiB } from "./lib/proc.ts";
import { cleanEnv } from "./lib/spawn.ts";
import { formatMs, formatRatio, median } from "./lib/stats.ts";

const PLAN = { warmup: 50, blocks: 30, perBlock: 10, floodRounds: 3 };
const binary = resolve(process.env.REPL_MCP_BINARY ?? join(import.meta.dir, "../dist/repl-mcp"));
const dir = mkdtempSync(join(tmpdir(), "repl-mcp-bench-viewer-"));
const project = join(dir, "project");
mkdirSync(project);
const env = cleanEnv({ HOME: dir, XDG_CACHE_HOME: join(dir, "cache"), XDG_RUNTIME_DIR: undefined });

const spec = (label: string, args: string[]) => ({ label, command: binary, args, env, cwd: project });

/** A page receiving the event stream, in its own process (bench/lib/sse-reader.ts). */
function receive(url: string) {
  const { origin, port, searchParams } = new URL(url);
  const cookie = `repl_mcp_viewer_${port}=${searchParams.get("token")}`;
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "lib/sse-reader.ts"), origin, cookie], {
    stdin: "pipe",
    stdout: "pipe",
  });
  return {
    async stop(): Promise<{ bytes: number; events: number }> {
      await proc.stdin.end();
      const text = await new Response(proc.stdout).text();
      await proc.exited;
      return JSON.parse(text);
    },
  };
}

async function warmBlock(served: Served, calls: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const began = performance.now();
    await served.call("execute_python", { code: "1+1" });
    times.push(performance.now() - began);
  }
  return median(times);
}

async function floodOnce(served: Served): Promise<{ ms: number; growthKiB: number }> {
  const before = rssKiB(served.pid) ?? 0;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssKiB(served.pid) ?? 0);
  }, 10);
  const began = performance.now();
  await served.call("execute_python", { code: FLOOD_CODE, timeout: 600 });
  clearInterval(sampler);
  return { ms: performance.now() - began, growthKiB: peak - before };
}

try {
  const off = (await start(spec("viewer off", []))).served;
  const on = (await start(spec("viewer on", ["--viewer"]))).served;
  const health = await on.call("python_health");
  const url = (health.structuredContent as { server: { viewer_url: string } }).server.viewer_url;
  const page = receive(url);
  for (const served of [off, on])
    for (let i = 0; i < PLAN.warmup; i++) await served.call("execute_python", { code: "1+1" });
  const medians = { off: [] as number[], on: [] as number[] };
  for (let block = 0; block < PLAN.blocks; block++) {
    const order = block % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const);
    for (const which of order)
      medians[which].push(await warmBlock(which === "off" ? off : on, PLAN.perBlock));
  }
  const warmOff = median(medians.off);
  const warmOn = median(medians.on);

  const floods = { off: [] as number[], on: [] as number[], growthOff: 0, growthOn: 0 };
  for (let round = 0; round < PLAN.floodRounds; round++) {
    const a = await floodOnce(off);
    const b = await floodOnce(on);
    floods.off.push(a.ms);
    floods.on.push(b.ms);
    floods.growthOff = Math.max(floods.growthOff, a.growthKiB);
    floods.growthOn = Math.max(floods.growthOn, b.growthKiB);
  }
  const got = await page.stop();
  const rows = [
    ["warm `1+1` round trip, viewer off", formatMs(warmOff), ""],
    [
      "warm `1+1` round trip, viewer on + page receiving",
      formatMs(warmOn),
      `${formatRatio(warmOn / warmOff)} off`,
    ],

    [
      "200 MB flood, viewer off",
      formatMs(median(floods.off)),
      `RSS growth ${(floods.growthOff / 1024).toFixed(1)} MiB`,
    ],
    [
      "200 MB flood, viewer on + page receiving",
      formatMs(median(floods.on)),
      `${formatRatio(median(floods.on) / median(floods.off))} off; RSS growth ${(floods.growthOn / 1024).toFixed(1)} MiB`,
    ],
    [
      "what the page received in all",
      `${got.events} events, ${(got.bytes / 1024).toFixed(1)} KiB`,
      `${PLAN.warmup + PLAN.blocks * PLAN.perBlock} warm cells and ${PLAN.floodRounds} floods`,
    ],
  ];
  console.log("\n## The viewer's cost (same binary, one run)\n");
  console.log("| What | Measured | Ratio / note |\n|---|---|---|");
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
