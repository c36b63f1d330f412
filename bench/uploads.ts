// Part four of `npm run bench`: `artifact()` of a 16 MiB value from a cell, side by side in the same
// cells with the cell writing the same bytes to a file (the baseline), with the other ways an upload
// can go for context: base64 chunks in frames with their window, and one chunk per round trip.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { start, stopAll } from "./lib/mcp.ts";
import { cleanEnv, output } from "./lib/spawn.ts";
import { formatMs, formatRatio, median } from "./lib/stats.ts";
import { table } from "./lib/table.ts";

const root = resolve(import.meta.dir, "..");
const binary = resolve(process.env.REPL_MCP_BINARY ?? join(root, "dist/repl-mcp"));
const ROUNDS = 15;
const TARGET = 2;

/**
 * One cell per round times every contender on the same 16 MiB, in an order that rotates from round to
 * round, and returns milliseconds by contender. The value exists before the timing starts; each
 * artifact is deleted and each file removed after it is timed, so every round starts alike.
 */
const ROUND = `
import hashlib, os, sys, time
w = sys.modules['__main__']
def timed(fn):
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000
def into_file():
    with open(copy, 'wb') as f:
        f.write(data)
def as_artifact(handover, window):
    def run():
        refs.append(artifact(data))
    saved = w.ARTIFACT_HANDOVER_MIN_BYTES, w.ARTIFACT_WINDOW
    w.ARTIFACT_HANDOVER_MIN_BYTES = saved[0] if handover else 1 << 40
    w.ARTIFACT_WINDOW = window
    try:
        return timed(run)
    finally:
        w.ARTIFACT_HANDOVER_MIN_BYTES, w.ARTIFACT_WINDOW = saved
contenders = [
    ('file', lambda: timed(into_file)),
    ('sha256', lambda: timed(lambda: hashlib.sha256(data).digest())),
    ('artifact', lambda: as_artifact(True, saved_window)),
    ('frames', lambda: as_artifact(False, saved_window)),
    ('frames, one at a time', lambda: as_artifact(False, 1)),
]
times = {}
for name, measure in contenders[turn % 5:] + contenders[:turn % 5]:
    refs = []
    times[name] = measure()
    for ref in refs:
        artifact_delete(ref)
    if os.path.exists(copy):
        os.unlink(copy)
times
`;

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), "repl-mcp-bench3-"));
  const home = join(tmp, "home");
  const project = join(tmp, "project");
  mkdirSync(home);
  mkdirSync(project);
  const env = cleanEnv({ HOME: home, XDG_CACHE_HOME: join(home, ".cache"), TMPDIR: tmp });
  try {
    const python = output(["python3", "-c", "import sys; print(sys.executable)"], env);
    const { served } = await start({
      label: "repl-mcp",
      command: binary,
      args: ["--python", python],
      env,
      cwd: project,
    });
    const setup = await served.call("execute_python", {
      code: `import os, sys\ndata = os.urandom(16 << 20)\ncopy = ${JSON.stringify(join(tmp, "copy.bin"))}\nsaved_window = sys.modules['__main__'].ARTIFACT_WINDOW\nNone`,
    });
    if (setup.isError) throw new Error(`setup cell failed: ${JSON.stringify(setup.structuredContent)}`);
    const samples: Record<string, number[]> = {};
    // The first round warms both sides (page cache, the server's code paths) and is not counted.
    for (let turn = -1; turn < ROUNDS; turn++) {
      const result = await served.call("execute_python", {
        code: `turn = ${turn + 1}\n${ROUND}`,
        timeout: 600,
      });
      const times = (result.structuredContent as { value?: Record<string, number>; error?: string }).value;
      if (!times)
        throw new Error(`upload round failed: ${JSON.stringify(result.structuredContent).slice(0, 500)}`);
      if (turn < 0) continue;
      for (const [name, ms] of Object.entries(times)) {
        samples[name] ??= [];
        samples[name].push(ms);
      }
    }
    await served.stop();
    const file = median(samples.file ?? []);
    const row = (label: string, name: string) => {
      const ms = median(samples[name] ?? []);
      return [label, formatMs(ms), formatRatio(ms / file)];
    };
    console.log(
      `\n11. a 16 MiB value from a cell, medians of ${ROUNDS} rounds (contenders rotate within each cell)`,
    );
    console.log(
      table(
        ["contender", "median", "÷ writing the file"],
        [
          ["the cell writes the bytes to a file (baseline)", formatMs(file), ""],
          row("the cell's SHA-256 of the bytes (the floor of an upload reporting it)", "sha256"),
          row("artifact(data): an unnamed file the server adopts, pieces in flight", "artifact"),
          row("the same as base64 chunks in frames, 8 in flight", "frames"),
          row("base64 chunks in frames, one round trip each (before)", "frames, one at a time"),
        ],
      ),
    );
    const ratio = median(samples.artifact ?? []) / file;
    console.log(`  target: artifact() ≤ ${TARGET}× writing the file → ${ratio <= TARGET ? "PASS" : "MISS"}`);
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
