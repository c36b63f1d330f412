// Runs the suite with bun's test runner and ends with the plain `N passed, N failed` line that CI reads.
// bun prints its summary on stderr; it is passed through and parsed. A file that fails to load counts as
// a failure. The exit code is bun's.
//
// Files run in parallel worker processes (most of a test's time is spent waiting on the processes it
// drives), the heaviest first as weighed in tests/timings.json (`--weigh` below); files that mostly wait
// out deadlines run beside them in a lane of their own (WAITING_LANE_MARK). Arguments are passed to `bun
// test`, so `bun run tests/run.ts broker` runs the files whose path contains "broker" (docs/development.md).
import { dlopen, FFIType } from "bun:ffi";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { homeEnv, WORKER_CACHE_VARIABLE } from "./support/home.ts";

const args = process.argv.slice(2);
const timings = join(import.meta.dir, "timings.json");

/**
 * The `python3` the suite's servers start: a bare virtual environment, first on PATH, of the system's
 * interpreter (`/usr/bin/python3`, the one the distribution's Jupyter and matplotlib are installed for,
 * which the package tests use by path) or, where there is none, of `python3` on PATH. Bare, so nothing of
 * the developer's site-packages leaks into the tests, nor their start-up hooks (a `.pth` file that imports
 * a package costs every interpreter start, and the suite starts about seven hundred); it also skips a
 * version manager's shim and build (pyenv's shim costs 0.3 s of CPU per start, and its unoptimised
 * CPython twice the CPU of the distribution's PGO build). Falls back to the interpreter itself if no
 * environment can be made.
 */
function pathWithBarePython(into: string): string {
  const path = process.env.PATH ?? "/usr/bin:/bin";
  const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const found = Bun.spawnSync([python, "-c", "import sys; print(sys.executable)"], { env: process.env });
  const real = found.success ? found.stdout.toString().trim() : "";
  if (!real.startsWith("/")) return path;
  const made = Bun.spawnSync([real, "-m", "venv", "--without-pip", into], { stderr: "pipe" });
  if (made.success && existsSync(join(into, "bin", "python3"))) return `${join(into, "bin")}:${path}`;
  console.error(
    `could not make a bare environment of ${real} (${made.stderr.toString().trim()}); using it directly`,
  );
  return `${dirname(real)}:${path}`;
}

/**
 * A worker cache as a server leaves it after its first cell (the worker's source and its compiled code),
 * for tests/support/home.ts to copy into each test server's fresh home; undefined if it cannot be made.
 */
async function prepareWorkerCache(path: string): Promise<string | undefined> {
  const binary = resolve(process.env.REPL_MCP_BINARY ?? join(import.meta.dir, "../dist/repl-mcp"));
  const home = mkdtempSync(join(tmpdir(), "repl-mcp-test-cache-"));
  process.on("exit", () => rmSync(home, { recursive: true, force: true }));
  const server = Bun.spawn([binary], {
    cwd: home,
    env: { ...homeEnv(home), PATH: path },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "ignore",
  });
  const requests = [
    {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: "tests/run.ts", version: "0" },
      },
    },
    { jsonrpc: "2.0", method: "notifications/initialized" },
    {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "execute_python", arguments: { code: "1" } },
    },
  ];
  server.stdin.write(`${requests.map((request) => JSON.stringify(request)).join("\n")}\n`);
  await server.stdin.flush();
  const timer = setTimeout(() => server.kill("SIGKILL"), 30_000);
  let seen = "";
  for await (const chunk of server.stdout) {
    seen += new TextDecoder().decode(chunk);
    if (seen.includes('"id":2')) break;
  }
  server.stdin.end();
  await server.exited;
  clearTimeout(timer);
  return seen.includes('"id":2') ? join(home, ".cache", "repl-mcp") : undefined;
}

/** Worker processes: files mostly wait on servers and Python, so more than one per core pays off. */
const WORKERS = Number(process.env.REPL_MCP_TEST_WORKERS ?? 4);

/**
 * Every process the suite starts and then loses (its parent gone before it) is re-parented to this
 * runner instead of to init (Linux's child subreaper), so the processes still here when the tests are
 * over are exactly the ones a test left behind. Returns false where that cannot be arranged.
 */
function adoptOrphans(): boolean {
  if (process.platform !== "linux") return false;
  try {
    const PR_SET_CHILD_SUBREAPER = 36;
    const { symbols } = dlopen("libc.so.6", {
      prctl: {
        args: [FFIType.i32, FFIType.u64, FFIType.u64, FFIType.u64, FFIType.u64],
        returns: FFIType.i32,
      },
    });
    return symbols.prctl(PR_SET_CHILD_SUBREAPER, 1n, 0n, 0n, 0n) === 0;
  } catch {
    return false;
  }
}

/** Live children of this process other than `except`, with their command lines. */
function children(except: Set<number>): { pid: number; command: string }[] {
  const found: { pid: number; command: string }[] = [];
  for (const task of readdirSync(`/proc/${process.pid}/task`)) {
    let listed = "";
    try {
      listed = readFileSync(`/proc/${process.pid}/task/${task}/children`, "utf8");
    } catch {
      continue;
    }
    for (const pid of listed.split(/\s+/).filter(Boolean).map(Number)) {
      if (except.has(pid)) continue;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
        if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
        const command = readFileSync(`/proc/${pid}/cmdline`, "latin1").replaceAll("\0", " ").trim();
        found.push({ pid, command });
      } catch {
        // Gone meanwhile.
      }
    }
  }
  return found;
}

/** Processes the tests left behind (after a grace for the ones still exiting): reported, then killed. */
async function leftBehind(except: Set<number>): Promise<number> {
  const deadline = Date.now() + 10_000;
  let left = children(except);
  while (left.length > 0 && Date.now() < deadline) {
    await Bun.sleep(100);
    left = children(except);
  }
  for (const { pid, command } of left) {
    console.error(`left behind by the tests: pid ${pid}: ${command.slice(0, 300)}`);
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  return left.length;
}

/**
 * One temporary directory for the whole run, given to the tests as TMPDIR: what a test leaves there (a
 * helper's directory whose cleanup never ran) goes with it at the end, instead of piling up in /tmp.
 */
const runTmp = mkdtempSync(join(tmpdir(), "repl-mcp-suite-"));
/** The bare python3 environment's entry in runTmp: the runner's own, not something a test left. */
const BARE_PYTHON = "python";

const watching = adoptOrphans();
const path = pathWithBarePython(join(runTmp, BARE_PYTHON));
const workerCache = await prepareWorkerCache(path);
const env = {
  ...process.env,
  PATH: path,
  TMPDIR: runTmp,
  // The test workers free and allocate large buffers all the time, and mimalloc's default returns freed
  // pages to the system after 10 ms, to fault them in again at the next allocation: a quarter of a
  // worker's own CPU. Kept: nothing is returned before the worker exits. (The servers the tests start get
  // it from their home's environment, tests/support/home.ts.)
  MIMALLOC_PURGE_DELAY: "-1",
  ...(workerCache ? { [WORKER_CACHE_VARIABLE]: workerCache } : {}),
};

/** The suite's test files, as bun names them (paths from the root, sorted). */
function testFiles(): string[] {
  const root = resolve(import.meta.dir, "..");
  return [...new Bun.Glob("tests/**/*.test.ts").scanSync(root)].sort();
}

/**
 * How much longer than its CPU time a file takes in a full run: four workers share two cores, and
 * sharing costs some more. Used to weigh files for the order (see weigh below).
 */
const CPU_STRETCH_IN_A_FULL_RUN = 2.4;

/**
 * `--weigh`: instead of the suite, runs each test file (or each matching the arguments) alone, in this
 * same environment, and records in tests/timings.json how long it will take in a full run: its own
 * wall time, or its CPU time stretched by its share of the cores, whichever is longer. bun orders files
 * by these numbers (each worker starts its heaviest), so files that burn CPU start first and the cores
 * are not left idle behind files that mostly wait out deadlines. Takes about fifteen minutes.
 */
async function weigh(filters: string[]): Promise<number> {
  const root = resolve(import.meta.dir, "..");
  const files = testFiles().filter(
    (file) => filters.length === 0 || filters.some((filter) => file.includes(filter)),
  );
  const recorded = JSON.parse(readFileSync(timings, "utf8")) as {
    version: number;
    files: Record<string, number>;
  };
  let failed = 0;
  for (const file of files) {
    const started = performance.now();
    const test = Bun.spawn([process.execPath, "test", "--timeout", "60000", file], {
      cwd: root,
      env,
      stdout: "ignore",
      stderr: "ignore",
    });
    const code = await test.exited;
    const wallMs = performance.now() - started;
    const cpuMs = Number(test.resourceUsage()?.cpuTime.total ?? 0n) / 1000;
    if (code !== 0) failed++;
    recorded.files[file] = Math.round(Math.max(wallMs, CPU_STRETCH_IN_A_FULL_RUN * cpuMs));
    console.log(
      `${file}: ${(wallMs / 1000).toFixed(1)} s wall, ${(cpuMs / 1000).toFixed(1)} s CPU${code ? ", FAILED" : ""}`,
    );
  }
  const sorted = Object.entries(recorded.files).sort(([, a], [, b]) => b - a);
  writeFileSync(
    timings,
    `${JSON.stringify({ version: recorded.version, files: Object.fromEntries(sorted) }, null, 2)}\n`,
  );
  return failed;
}

if (args[0] === "--weigh") {
  const failed = await weigh(args.slice(1));
  const orphans = watching ? await leftBehind(new Set()) : 0;
  rmSync(runTmp, { recursive: true, force: true });
  if (failed > 0) console.error(`${failed} files failed while weighed: their numbers are recorded anyway`);
  if (orphans > 0) console.error(`${orphans} processes were left behind by the files weighed (listed above)`);
  process.exit(failed > 0 || orphans > 0 ? 1 : 0);
}

/**
 * A test file whose tests mostly wait out product deadlines (a 30 s stall, a reload, an agent CLI's turns)
 * and cost little CPU says so with this line. In a full run those files go to a lane of their own: one
 * more bun test process beside the workers, running them one after the other. The workers then keep both
 * cores busy instead of sitting in the same waits at once: in the order bun picks, such files met in most
 * workers between the second and third minute, and the cores were 65-90 % busy for about a minute. Their
 * reports are printed after the workers' (two runs' reports must not interleave). Part of the suite, given
 * by arguments, runs among the workers as before.
 */
const WAITING_LANE_MARK = "// runner: waiting lane";

function inWaitingLane(file: string): boolean {
  const source = readFileSync(resolve(import.meta.dir, "..", file), "utf8");
  return source.split("\n", 40).some((line) => line.trim() === WAITING_LANE_MARK);
}

interface BunTestRun {
  exited: Promise<number>;
  /** The end of what it printed on stderr (where bun writes results and the summary). */
  tail: () => string;
}

/**
 * Starts `bun test` with `extra` arguments. Its stderr is passed through as it comes, or, with `held`, kept
 * and printed by `release()` (so two runs' file reports never interleave).
 */
function bunTest(extra: string[], held = false): BunTestRun & { release: () => void } {
  const proc = Bun.spawn(
    [
      process.execPath,
      "test",
      // bun 1.4 ignores bunfig.toml's [test] timeout, so the default per-test limit is given here.
      "--timeout",
      "60000",
      // One module registry per process across its files: evaluating the SDK and the helpers again for
      // each of ~90 files costs more CPU than a worker has to spare. Test files therefore register their
      // own hooks; a helper module must not (tests/fixtures/peers/self-test.ts shows how).
      "--no-isolate",
      ...extra,
    ],
    { stdout: "inherit", stderr: "pipe", env },
  );
  const chunks: Uint8Array[] = [];
  let tail = "";
  let released = !held;
  const decoder = new TextDecoder();
  const read = (async () => {
    for await (const chunk of proc.stderr) {
      if (released) process.stderr.write(chunk);
      else chunks.push(chunk);
      tail = (tail + decoder.decode(chunk, { stream: true })).slice(-20_000);
    }
  })();
  return {
    exited: read.then(() => proc.exited),
    tail: () => tail,
    release: () => {
      for (const chunk of chunks.splice(0)) process.stderr.write(chunk);
      released = true;
    },
  };
}

const parallel = [`--parallel=${WORKERS}`, `--timings=${timings}`];
const runs: BunTestRun[] = [];
if (args.length > 0) {
  // A part of the suite: bun's own filters, every matching file among the workers.
  const only = bunTest([...parallel, ...args]);
  await only.exited;
  runs.push(only);
} else {
  const lane = testFiles().filter(inWaitingLane);
  const workers = bunTest([...parallel, ...lane.map((file) => `--path-ignore-patterns=${file}`)]);
  // "./" makes each argument a path, not a filter that would also match longer names.
  const paths = lane.map((file) => `./${file}`);
  const waiting = lane.length > 0 ? bunTest(paths, true) : undefined;
  await workers.exited;
  runs.push(workers);
  if (waiting) {
    waiting.release();
    await waiting.exited;
    runs.push(waiting);
  }
}
const code = Math.max(...(await Promise.all(runs.map((run) => run.exited))));
const orphans = watching ? await leftBehind(new Set()) : 0;
const leftovers = readdirSync(runTmp).filter((entry) => entry !== BARE_PYTHON);
if (leftovers.length > 0)
  console.error(`${leftovers.length} temporary entries the tests left in ${runTmp} are removed with it`);
rmSync(runTmp, { recursive: true, force: true });

const count = (label: string) =>
  runs
    .map((run) => Number(run.tail().match(new RegExp(`^\\s*(\\d+) ${label}\\s*$`, "m"))?.[1] ?? 0))
    .reduce((sum, n) => sum + n, 0);
const passed = count("pass");
const failed = count("fail") + count("errors?");
// bun exits nonzero without a summary when nothing could run at all: count that as one failure.
const reported = (failed === 0 && code !== 0 ? 1 : failed) + orphans;
if (orphans > 0)
  console.error(`${orphans} processes were left behind by the tests (listed above): a failure`);
console.log(`${passed} passed, ${reported} failed`);
process.exit(code !== 0 ? code : orphans > 0 ? 1 : 0);
