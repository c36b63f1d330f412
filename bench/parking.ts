// `npm run bench` (after bench/viewer.ts): what keeping a session costs and how fast it comes back,
// measured side by side in one run with the same binary (docs/sessions.md, "Keeping a session").
//
// - the relay: warm `1+1` round trips of a kept session (frames through its keeping guardian) against an
//   unkept one (direct pipes) on the same server, in alternating blocks, and each guardian's CPU per call;
// - memory: PSS of worker + guardian for the kept session and the unkept one while held, and for the
//   kept one once parked;
// - idle: CPU time and wake-ups of a parked guardian and worker over a few seconds (no polling loop: 0);
// - adoption: python_session_open of the parked session in a fresh server, from the call to its answer
//   (target ≤ 100 ms), against opening a new session there (which checks its interpreter), and the
//   spawn → initialize of a server whose default session is parked against one with none.
//
//   bun run bench/parking.ts            (REPL_MCP_BINARY overrides dist/repl-mcp)
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type Served, start, stopAll } from "./lib/mcp.ts";
import { cpuUse, pssKiB } from "./lib/proc.ts";
import { cleanEnv, output } from "./lib/spawn.ts";
import { formatMiB, formatMs, formatRatio, median } from "./lib/stats.ts";

const PLAN = { warmup: 50, blocks: 20, perBlock: 10, cpuCalls: 300, idleSeconds: 5, adoptions: 15 };
const ADOPT_TARGET_MS = 100;
const binary = resolve(process.env.REPL_MCP_BINARY ?? join(import.meta.dir, "../dist/repl-mcp"));
const dir = mkdtempSync(join(tmpdir(), "repl-mcp-bench-parking-"));
const project = join(dir, "project");
mkdirSync(project);
const env = cleanEnv({ HOME: dir, XDG_CACHE_HOME: join(dir, "cache"), XDG_RUNTIME_DIR: undefined });
const parked = join(dir, "cache", "repl-mcp", "parked");
const spec = (label: string, args: string[] = []) => ({ label, command: binary, args, env, cwd: project });

interface Record {
  name: string;
  guardian_pid: number;
  worker_pid: number;
  state: string;
}

function records(): Record[] {
  return readdirSync(parked)
    .filter((name) => name.endsWith(".json") && !name.endsWith("-kernel.json"))
    .map((name) => JSON.parse(readFileSync(join(parked, name), "utf8")) as Record);
}

function structured(result: Awaited<ReturnType<Served["call"]>>): any {
  return result.structuredContent;
}

async function openSession(served: Served, name: string, keep?: string) {
  return structured(await served.call("python_session_open", { name, project, ...(keep ? { keep } : {}) }));
}

async function cellBlock(served: Served, session: string, calls: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const began = performance.now();
    await served.call("execute_python", { session_id: session, code: "1+1" });
    times.push(performance.now() - began);
  }
  return median(times);
}

/** A session's guardian (its worker's parent, the group leader) and worker. */
function pair(workerPid: number): [number, number] {
  const stat = readFileSync(`/proc/${workerPid}/stat`, "latin1");
  const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  return [parent, workerPid];
}

const pss = (pids: number[]) => pids.reduce((sum, pid) => sum + (pssKiB(pid) ?? 0), 0);

/** Anonymous memory (the heaps) in KiB: the rest of PSS is the binary's and libraries' file pages. */
function anon(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "latin1");
    total += Number(/^Pss_Anon:\s+(\d+) kB$/m.exec(rollup)?.[1] ?? 0);
  }
  return total;
}

/**
 * CPU of whole processes (utime + stime from /proc/<pid>/stat, in clock ticks of 10 ms: threads that
 * ended count too), and wake-ups (voluntary context switches) of each thread, by thread id.
 */
function idleSnapshot(pids: number[]): { ticks: number; wakeups: Map<string, number> } {
  let ticks = 0;
  const wakeups = new Map<string, number>();
  for (const pid of pids) {
    const fields = readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.split(" ") ?? [];
    ticks += Number(fields[11]) + Number(fields[12]);
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const status = readFileSync(`/proc/${pid}/task/${task}/status`, "latin1");
      wakeups.set(`${pid}/${task}`, Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1] ?? 0));
    }
  }
  return { ticks, wakeups };
}

/** Between two snapshots: CPU in ms (10 ms steps) and the wake-ups of threads alive through both. */
function idleBetween(a: ReturnType<typeof idleSnapshot>, b: ReturnType<typeof idleSnapshot>) {
  let wakeups = 0;
  for (const [task, count] of b.wakeups) wakeups += count - (a.wakeups.get(task) ?? 0);
  return { cpuMs: (b.ticks - a.ticks) * 10, wakeups };
}

async function cpuPerCall(served: Served, session: string, guardian: number): Promise<number> {
  const before = cpuUse(guardian).cpuUs;
  await cellBlock(served, session, PLAN.cpuCalls);
  return (cpuUse(guardian).cpuUs - before) / PLAN.cpuCalls;
}

/** Relay cost and held memory, then the kept session parked: its memory and its idle CPU. */
async function relayAndParking() {
  const { served } = await start(spec("relay"));
  // The first worker of a fresh cache compiles worker.py and keeps the garbage (about 13 MiB here):
  // one throwaway session first, so both measured workers start from the cached code.
  const throwaway = (await openSession(served, "first")).session_id;
  await served.call("execute_python", { session_id: throwaway, code: "1+1" });
  await served.call("python_session_close", { session_id: throwaway });
  const kept = (await openSession(served, "kept", "1h")).session_id;
  const plain = (await openSession(served, "plain")).session_id;
  for (const session of [kept, plain]) await cellBlock(served, session, PLAN.warmup);
  const medians = { kept: [] as number[], plain: [] as number[] };
  for (let block = 0; block < PLAN.blocks; block++) {
    const order = block % 2 === 0 ? (["kept", "plain"] as const) : (["plain", "kept"] as const);
    for (const which of order)
      medians[which].push(await cellBlock(served, which === "kept" ? kept : plain, PLAN.perBlock));
  }
  const workerOf = async (session: string) =>
    structured(await served.call("python_session_inspect", { session_id: session })).python.pid as number;
  const keptPair = pair(await workerOf(kept));
  const plainPair = pair(await workerOf(plain));
  const guardianCpu = {
    kept: await cpuPerCall(served, kept, keptPair[0]),
    plain: await cpuPerCall(served, plain, plainPair[0]),
  };
  const held = { kept: pss(keptPair), plain: pss(plainPair) };
  const heldAnon = { kept: anon(keptPair), plain: anon(plainPair) };
  await served.client.close();
  const waitParked = performance.now();
  while (!records().some((record) => record.state === "parked") && performance.now() - waitParked < 10_000)
    await Bun.sleep(10);
  const parkedPss = pss(keptPair);
  const parkedAnon = anon(keptPair);
  // Right after parking the runtime's own threads (its garbage collector) still finish their work;
  // then nothing runs: the second window is the steady state.
  const first = idleSnapshot(keptPair);
  await Bun.sleep(PLAN.idleSeconds * 1000);
  const settled = idleSnapshot(keptPair);
  await Bun.sleep(PLAN.idleSeconds * 1000);
  const after = idleSnapshot(keptPair);
  return {
    warm: { kept: median(medians.kept), plain: median(medians.plain) },
    guardianCpu,
    held,
    parkedPss,
    parkedAnon,
    heldAnon,
    settling: idleBetween(first, settled),
    idle: idleBetween(settled, after),
  };
}

/** The parked session adopted by one fresh server after another; a new session opened beside it. */
async function adoptions() {
  const adopt: number[] = [];
  const fresh: number[] = [];
  for (let round = 0; round < PLAN.adoptions; round++) {
    const { served } = await start(spec(`adopter ${round}`));
    const began = performance.now();
    const opened = await openSession(served, "kept");
    adopt.push(performance.now() - began);
    if (!opened.adopted) throw new Error(`round ${round}: the parked session was not adopted`);
    const freshBegan = performance.now();
    const other = await openSession(served, `fresh-${round}`);
    fresh.push(performance.now() - freshBegan);
    await served.call("python_session_close", { session_id: other.session_id });
    await served.client.close();
    const waiting = performance.now();
    while (!records().some((record) => record.state === "parked") && performance.now() - waiting < 10_000)
      await Bun.sleep(5);
  }
  return { adopt: median(adopt), adoptMax: Math.max(...adopt), fresh: median(fresh) };
}

/** spawn → initialize of a server whose default session is parked (adopted before serving) and of one with none. */
async function startWithDefault() {
  const times = { parked: [] as number[], none: [] as number[] };
  const other = join(dir, "elsewhere");
  mkdirSync(other);
  {
    const { served } = await start(spec("default kept", ["--keep-sessions", "1h"]));
    await served.call("execute_python", { code: "x = 1" });
    await served.client.close();
  }
  for (let round = 0; round < 10; round++) {
    for (const which of round % 2 === 0 ? (["parked", "none"] as const) : (["none", "parked"] as const)) {
      const cwd = which === "parked" ? project : other;
      const { served, initMs } = await start({ ...spec(`default ${which}`, ["--keep-sessions", "1h"]), cwd });
      times[which].push(initMs);
      if (which === "parked" && !structured(await served.call("python_health")).server.adopted)
        throw new Error("the default session was not adopted at start");
      await served.client.close();
      const waiting = performance.now();
      while (performance.now() - waiting < 10_000 && records().some((record) => record.state === "held"))
        await Bun.sleep(5);
    }
  }
  return { parked: median(times.parked), none: median(times.none) };
}

try {
  const relay = await relayAndParking();
  const adopted = await adoptions();
  const defaults = await startWithDefault();
  const rows = [
    ["warm `1+1` round trip, unkept session (direct pipes)", formatMs(relay.warm.plain), ""],
    [
      "warm `1+1` round trip, kept session (relayed by its guardian)",
      formatMs(relay.warm.kept),
      `${formatRatio(relay.warm.kept / relay.warm.plain)} unkept; +${formatMs(relay.warm.kept - relay.warm.plain)}`,
    ],
    [
      "guardian CPU per warm call: unkept / kept",
      `${relay.guardianCpu.plain.toFixed(1)} µs / ${relay.guardianCpu.kept.toFixed(1)} µs`,
      "the relay's own cost",
    ],
    [
      "PSS worker + guardian, unkept session, held",
      formatMiB(relay.held.plain),
      `of it anonymous ${formatMiB(relay.heldAnon.plain)}`,
    ],
    [
      "PSS worker + guardian, kept session, held",
      formatMiB(relay.held.kept),
      `${formatRatio(relay.held.kept / relay.held.plain)} unkept; anonymous ${formatMiB(relay.heldAnon.kept)}`,
    ],
    [
      "PSS worker + guardian, kept session, parked (server gone)",
      formatMiB(relay.parkedPss),
      `anonymous ${formatMiB(relay.parkedAnon)}; the rest is file pages (the binary's, no longer shared with a server)`,
    ],
    [
      `parked guardian + worker, first ${PLAN.idleSeconds} s`,
      `${relay.settling.cpuMs} ms CPU, ${relay.settling.wakeups} wake-ups`,
      "the runtime's garbage collector finishing",
    ],
    [
      `parked guardian + worker, next ${PLAN.idleSeconds} s`,
      `${relay.idle.cpuMs} ms CPU, ${relay.idle.wakeups} wake-ups`,
      `target: 0 (no polling loop): ${relay.idle.wakeups === 0 ? "met" : "MISS"}`,
    ],
    [
      "python_session_open adopting the parked session (median / max)",
      `${formatMs(adopted.adopt)} / ${formatMs(adopted.adoptMax)}`,
      `target ≤ ${ADOPT_TARGET_MS} ms: ${adopted.adoptMax <= ADOPT_TARGET_MS ? "met" : "MISS"}`,
    ],
    [
      "python_session_open of a new session (interpreter check)",
      formatMs(adopted.fresh),
      `adoption ${formatRatio(adopted.adopt / adopted.fresh)} of it`,
    ],
    ["spawn → initialize, no parked default session", formatMs(defaults.none), ""],
    [
      "spawn → initialize, parked default session adopted first",
      formatMs(defaults.parked),
      `+${formatMs(defaults.parked - defaults.none)}`,
    ],
  ];
  console.log("\n## Kept sessions: the relay, parking and adoption (same binary, one run)\n");
  console.log("| What | Measured | Ratio / note |\n|---|---|---|");
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
} finally {
  await stopAll();
  try {
    output([binary, "sessions", "stop", "--all"], env);
  } catch (error) {
    console.error(`stopping the parked sessions: ${(error as Error).message}`);
  }
  rmSync(dir, { recursive: true, force: true });
}
