// `npm run bench`: repl-mcp against its own 1.x build and against references built here, measured side by
// side in one run.
//
//   bun run bench/run.ts            (npm run bench builds dist/repl-mcp first)
//
// REPL_MCP_BINARY overrides the binary under test, REPL_MCP_1X_BINARY the 1.x build (otherwise built once
// from its commit and cached, see bench/lib/product-1x.ts). All processes run with HOME and XDG dirs
// inside a temp dir, which is removed at the end together with every process the benchmark started.
// The printed report is informational: a missed target never makes the run fail.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { release, tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { brokeredCalls } from "./bridge.ts";
import { flood } from "./flood.ts";
import { leftovers, type ServerSpec, stopAll, withServer } from "./lib/mcp.ts";
import { PRODUCT_1X_COMMIT, product1x } from "./lib/product-1x.ts";
import {
  COMPILE_FLAGS,
  cleanEnv,
  compileFloorBridge,
  compileReference,
  echoPeer,
  floorBridgeArgs,
  output,
} from "./lib/spawn.ts";
import {
  type Contenders,
  firstCellLatency,
  memory,
  progress,
  spawnToInitialize,
  warmRoundTrips,
} from "./phases.ts";
import { type Header, render } from "./report.ts";
import { extraSessions, growth } from "./scaling.ts";

const PLAN = {
  spawn: { rounds: 30, warmup: 2 },
  firstCell: { rounds: 12, warmup: 1 },
  warm: { warmup: 50, blocks: 30, perBlock: 10, pacedBlocks: 25, pacedPerBlock: 10, cpuCalls: 500 },
  memoryRounds: 3,
  sessionRounds: 2,
  growth: { blocks: 12, perBlock: 10 },
  floodRounds: 5,
};

const root = resolve(import.meta.dir, "..");
const binary = resolve(process.env.REPL_MCP_BINARY ?? join(root, "dist/repl-mcp"));
const references = join(root, "bench/references");

function machine(): string {
  let cpu = "unknown CPU";
  try {
    cpu = readFileSync("/proc/cpuinfo", "utf8").match(/^model name\s*:\s*(.+)$/m)?.[1] ?? cpu;
  } catch {}
  return `${cpu}, ${navigator.hardwareConcurrency} CPUs, ${process.platform} ${release()}`;
}

function findWorkerSource(dir: string): string | undefined {
  try {
    const name = readdirSync(dir).find((entry) => entry.endsWith(".py"));
    return name ? join(dir, name) : undefined;
  } catch {
    return undefined;
  }
}

function checkoutWorker(): string {
  return join(root, "worker.py");
}

function loadAverage(): string {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    return "n/a";
  }
}

async function main(): Promise<void> {
  const began = performance.now();
  const loadBefore = loadAverage();
  if (!existsSync(binary)) {
    process.stderr.write(`bench: ${binary} does not exist; build it first (npm run build)\n`);
    process.exit(1);
  }
  const tmp = mkdtempSync(join(tmpdir(), "repl-mcp-bench-"));
  const cleanup = async () => {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  };
  const interrupted = (signal: NodeJS.Signals) => {
    process.stderr.write(`bench: ${signal}, cleaning up\n`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);

  try {
    const dirs = Object.fromEntries(
      ["home", "cache", "config", "data", "state", "project", "bridge"].map((name) => {
        const dir = join(tmp, name);
        mkdirSync(dir, { recursive: true });
        return [name, dir];
      }),
    ) as Record<string, string>;
    const env = cleanEnv({
      HOME: dirs.home,
      XDG_CACHE_HOME: dirs.cache,
      XDG_CONFIG_HOME: dirs.config,
      XDG_DATA_HOME: dirs.data,
      XDG_STATE_HOME: dirs.state,
      REPL_MCP_PYTHON: undefined,
    });
    const project = dirs.project as string;

    // One resolution of python3 on PATH to the interpreter it really runs; everyone gets that one.
    const pythonOnPath = Bun.which("python3", { PATH: env.PATH });
    if (!pythonOnPath) throw new Error("no python3 on PATH");
    const [python, pythonVersion] = output(
      ["python3", "-c", "import sys, platform; print(sys.executable); print(platform.python_version())"],
      env,
    ).split("\n") as [string, string];

    const oldBinary = await product1x(root, progress);
    progress("compiling the reference server and the floor bridge");
    const trivialBinary = join(tmp, "trivial-server");
    await compileReference(root, trivialBinary, python);
    const bridgeBinary = join(tmp, "floor-bridge");
    await compileFloorBridge(root, bridgeBinary, python);
    // Private copies, so a rebuild of dist/ during the run cannot mix two builds in one report.
    const replBinary = join(tmp, "repl-mcp");
    copyFileSync(binary, replBinary);
    chmodSync(replBinary, 0o755);
    const oldCopy = join(tmp, "repl-mcp-1.x");
    copyFileSync(oldBinary, oldCopy);
    chmodSync(oldCopy, 0o755);
    // The brokered calls run in a project of their own, whose registry names the peer; the other
    // phases' project has none.
    const [peerCommand, ...peerArgs] = echoPeer(root) as [string, ...string[]];
    writeFileSync(
      join(dirs.bridge as string, ".mcp.json"),
      JSON.stringify({ mcpServers: { peer: { command: peerCommand, args: peerArgs } } }),
    );

    const spec = (label: string, command: string, args: string[], cwd = project): ServerSpec => ({
      label,
      command,
      args,
      env,
      cwd,
    });
    const contenders: Contenders = {
      repl: spec("repl-mcp", replBinary, ["--python", python]),
      old: spec("repl-mcp 1.x", oldCopy, ["--python", python]),
      replOnPath: spec("repl-mcp (python3 on PATH)", replBinary, []),
      trivial: spec("trivial server", trivialBinary, []),
      floor: spec("composed floor", trivialBinary, ["--eval-loop", python, join(references, "eval-loop.py")]),
      python,
      pythonOnPath,
      env,
      binary: replBinary,
      workerScript: checkoutWorker(),
      evalLoopScript: join(references, "eval-loop.py"),
      cwd: project,
    };

    // One cell first: the binary materializes its worker source, which the first-cell anatomy then runs
    // alone (the checkout's worker.py stands in if the cache holds no such file).
    await withServer(contenders.repl, (served) => served.call("execute_python", { code: "1+1" }));
    contenders.workerScript = findWorkerSource(join(dirs.cache as string, "repl-mcp")) ?? checkoutWorker();

    const spawn = await spawnToInitialize(contenders, PLAN.spawn.rounds, PLAN.spawn.warmup);
    const firstCell = await firstCellLatency(contenders, PLAN.firstCell.rounds, PLAN.firstCell.warmup);
    const warm = await warmRoundTrips(contenders, PLAN.warm);
    const memoryResult = await memory(contenders, PLAN.memoryRounds);
    const sessions = await extraSessions(contenders, PLAN.sessionRounds);
    const growthResult = await growth(contenders, PLAN.growth.blocks, PLAN.growth.perBlock);
    const floodResult = await flood(contenders, PLAN.floodRounds);
    const bridge = await brokeredCalls({
      repl: spec("repl-mcp", replBinary, ["--python", python], dirs.bridge),
      old: spec("repl-mcp 1.x", oldCopy, ["--python", python], dirs.bridge),
      floor: spec("floor bridge", bridgeBinary, floorBridgeArgs(root, python), dirs.bridge),
      peer: echoPeer(root),
      env,
    });

    const header: Header = {
      machine: machine(),
      bun: Bun.version,
      python,
      pythonVersion,
      pythonOnPath,
      binary,
      binaryBytes: statSync(replBinary).size,
      oldBuild: `commit ${PRODUCT_1X_COMMIT.slice(0, 7)}, the last on the SDK 1.x`,
      oldBinary,
      oldBinaryBytes: statSync(oldCopy).size,
      workerScript: contenders.workerScript.startsWith(tmp)
        ? `$XDG_CACHE_HOME/repl-mcp/${basename(contenders.workerScript)}, as the binary wrote it`
        : contenders.workerScript,
      reference: "bench/references/trivial-server.ts",
      referenceBytes: statSync(trivialBinary).size,
      compileFlags: [...COMPILE_FLAGS, "--bytecode-order=<a profile of its own run>"].join(" "),
      loadBefore,
      loadAfter: loadAverage(),
    };
    await cleanup();
    process.stdout.write(
      `${render(
        header,
        {
          spawn,
          firstCell,
          warm,
          memory: memoryResult,
          sessions,
          growth: growthResult,
          flood: floodResult,
          bridge,
        },
        performance.now() - began,
        leftovers,
      )}\n`,
    );
  } finally {
    await cleanup();
  }
}

await main();
