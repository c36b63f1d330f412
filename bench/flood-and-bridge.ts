// Part two of `npm run bench`: an output flood and brokered MCP calls, each measured side by side in
// one run against references built here.
//
//   1. A cell printing 200 MB: repl-mcp vs the composed floor (the trivial compiled server forwarding to
//      a minimal eval loop that keeps 50,000 characters) vs Python writing the same to /dev/null; and
//      the server's peak RSS growth while the cell runs.
//   2. mcp.call to a stdio MCP peer, per call, vs the SDK client calling the same peer directly.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { start, stopAll } from "./lib/mcp.ts";
import { rssKiB } from "./lib/proc.ts";
import { cleanEnv, compileReference, output, timeCommand } from "./lib/spawn.ts";
import { formatMs, formatRatio, median, percentile } from "./lib/stats.ts";
import { table } from "./lib/table.ts";

const root = resolve(import.meta.dir, "..");
const binary = resolve(process.env.REPL_MCP_BINARY ?? join(root, "dist/repl-mcp"));
const FLOOD = "for _ in range(2_000_000):\n    print('x' * 99)";
const FLOOD_ROUNDS = 5;
const CALLS = 300;
/**
 * Calls made before timing, on both sides. The direct client runs in this process, whose SDK client
 * code is already compiled by the JIT from the earlier phases; the server's broker path runs only in
 * these calls. A long warm-up compares the two in the same, steady state.
 */
const BRIDGE_WARMUP_CALLS = 1000;
/** Timed calls per block; blocks of the two contenders alternate. */
const BRIDGE_BLOCK_CALLS = 30;

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), "repl-mcp-bench2-"));
  const home = join(tmp, "home");
  const project = join(tmp, "project");
  mkdirSync(home);
  mkdirSync(project);
  const env = cleanEnv({ HOME: home, XDG_CACHE_HOME: join(home, ".cache") });
  try {
    const python = output(["python3", "-c", "import sys; print(sys.executable)"], env);
    const reference = join(tmp, "trivial-server");
    await compileReference(root, reference, python);
    const spec = (label: string, command: string, args: string[]) => ({
      label,
      command,
      args,
      env,
      cwd: project,
    });

    // 1. Output flood.
    const ours = await start(spec("repl-mcp", binary, ["--python", python]));
    const floor = await start(
      spec("composed floor", reference, ["--eval-loop", python, join(root, "bench/references/eval-loop.py")]),
    );
    await ours.served.call("execute_python", { code: "1" });
    await floor.served.call("execute_python", { code: "1" });
    const times = { ours: [] as number[], floor: [] as number[], devnull: [] as number[] };
    let peakGrowthKiB = 0;
    let kept = 0;
    for (let round = 0; round < FLOOD_ROUNDS; round++) {
      const before = rssKiB(ours.served.pid) ?? 0;
      let peak = before;
      const sampler = setInterval(() => {
        peak = Math.max(peak, rssKiB(ours.served.pid) ?? 0);
      }, 10);
      let began = performance.now();
      const result = await ours.served.call("execute_python", { code: FLOOD, timeout: 600 });
      times.ours.push(performance.now() - began);
      clearInterval(sampler);
      peakGrowthKiB = Math.max(peakGrowthKiB, peak - before);
      kept = Buffer.byteLength(String((result.structuredContent as { stdout?: string }).stdout ?? ""));
      began = performance.now();
      await floor.served.call("execute_python", { code: FLOOD });
      times.floor.push(performance.now() - began);
      times.devnull.push(await timeCommand([python, "-c", FLOOD], env));
    }
    await ours.served.stop();
    await floor.served.stop();
    const flood = median(times.ours);
    console.log("\n5. a cell printing 200 MB (2,000,000 lines of 100 bytes), medians of", FLOOD_ROUNDS);
    console.log(
      table(
        ["contender", "median", "repl-mcp / it"],
        [
          [`repl-mcp execute_python (stdout kept: ${kept} bytes)`, formatMs(flood), ""],
          [
            "composed floor, bounded to 50,000 characters",
            formatMs(median(times.floor)),
            formatRatio(flood / median(times.floor)),
          ],
          [
            "python3 -c ... > /dev/null (whole process)",
            formatMs(median(times.devnull)),
            formatRatio(flood / median(times.devnull)),
          ],
        ],
      ),
    );
    console.log(
      `  server peak RSS growth during the flood: ${(peakGrowthKiB / 1024).toFixed(1)} MiB (target ≤ 5 MiB)`,
    );
    console.log(`  target: ≤ 2× the composed floor → ${flood / median(times.floor) <= 2 ? "PASS" : "MISS"}`);

    // 2. Brokered calls.
    const peer = join(root, "tests/fixtures/peers/stdio-peer.ts");
    writeFileSync(
      join(project, ".mcp.json"),
      JSON.stringify({ mcpServers: { peer: { command: process.execPath, args: [peer] } } }),
    );
    const direct = new Client({ name: "bench", version: "0" }, { capabilities: {} });
    await direct.connect(
      new StdioClientTransport({ command: process.execPath, args: [peer], env, stderr: "ignore" }),
    );
    const brokered = await start(spec("repl-mcp", binary, ["--python", python]));
    const echo = "mcp.call('peer', 'echo', text='x')";
    // One cell times a block of brokered calls and returns their durations in milliseconds.
    const block = [
      "import time",
      "samples = []",
      `for _ in range(${BRIDGE_BLOCK_CALLS}):`,
      "    began = time.perf_counter()",
      `    ${echo}`,
      "    samples.append((time.perf_counter() - began) * 1000)",
      "samples",
    ].join("\n");
    const brokeredBlock = async (): Promise<number[]> => {
      const result = await brokered.served.call("execute_python", { code: block, timeout: 300 });
      const structured = result.structuredContent as { value?: number[]; error?: string };
      if (!Array.isArray(structured.value)) throw new Error(`mcp.call loop failed: ${structured.error}`);
      return structured.value;
    };
    const directBlock = async (): Promise<number[]> => {
      const times: number[] = [];
      for (let i = 0; i < BRIDGE_BLOCK_CALLS; i++) {
        const began = performance.now();
        await direct.callTool({ name: "echo", arguments: { text: "x" } });
        times.push(performance.now() - began);
      }
      return times;
    };
    for (let i = 0; i < BRIDGE_WARMUP_CALLS; i++)
      await direct.callTool({ name: "echo", arguments: { text: "x" } });
    await brokered.served.call("execute_python", {
      code: `for _ in range(${BRIDGE_WARMUP_CALLS}): ${echo}`,
      timeout: 300,
    });
    // Blocks alternate (who goes first rotates), so a machine that changes pace mid-run slows both.
    const directTimes: number[] = [];
    const brokeredTimes: number[] = [];
    for (let round = 0; round < CALLS / BRIDGE_BLOCK_CALLS; round++) {
      if (round % 2 === 0) directTimes.push(...(await directBlock()));
      brokeredTimes.push(...(await brokeredBlock()));
      if (round % 2 === 1) directTimes.push(...(await directBlock()));
    }
    await direct.close();
    await brokered.served.stop();
    const viaMedian = median(brokeredTimes);
    const viaP90 = percentile(brokeredTimes, 0.9);
    const ratio = viaMedian / median(directTimes);
    console.log(
      `\n6. one tools/call to a stdio peer (echo), ${CALLS} sequential calls each in alternating blocks of ${BRIDGE_BLOCK_CALLS}, after ${BRIDGE_WARMUP_CALLS} untimed ones`,
    );
    console.log(
      table(
        ["contender", "median", "p90"],
        [
          ["mcp.call from a cell (worker → server → peer)", formatMs(viaMedian), formatMs(viaP90)],
          [
            "SDK client calling the peer directly",
            formatMs(median(directTimes)),
            formatMs(percentile(directTimes, 0.9)),
          ],
        ],
      ),
    );
    console.log(`  ratio ${formatRatio(ratio)} (target ≤ 2×) → ${ratio <= 2 ? "PASS" : "MISS"}`);
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
