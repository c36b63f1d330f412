// Process facts read straight from /proc (Linux): resident memory, parent and children, liveness.
import { readdirSync, readFileSync } from "node:fs";

function read(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** VmRSS of a process in KiB, or undefined when the process is gone. */
export function rssKiB(pid: number): number | undefined {
  const status = read(`/proc/${pid}/status`);
  const match = status?.match(/^VmRSS:\s+(\d+)\s+kB$/m);
  return match ? Number(match[1]) : undefined;
}

/** Fields of /proc/<pid>/stat after the command name (which may itself contain spaces or parens). */
function statFields(pid: number): string[] | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  return stat
    .slice(stat.lastIndexOf(")") + 2)
    .trim()
    .split(" ");
}

export function parentOf(pid: number): number | undefined {
  const fields = statFields(pid);
  return fields ? Number(fields[1]) : undefined;
}

/** True while the process exists and is not a zombie waiting to be reaped. */
export function isAlive(pid: number): boolean {
  const fields = statFields(pid);
  return fields !== undefined && fields[0] !== "Z" && fields[0] !== "X";
}

/** Direct children, from every thread's children list (a child may have been forked by any thread). */
export function childrenOf(pid: number): number[] {
  const found = new Set<number>();
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  for (const task of tasks) {
    const list = read(`/proc/${pid}/task/${task}/children`);
    for (const word of list?.split(" ") ?? []) if (word.trim()) found.add(Number(word));
  }
  return [...found];
}

/** The process and all its descendants, parents first. */
export function processTree(pid: number): number[] {
  const tree: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = queue.shift() as number;
    if (tree.includes(next)) continue;
    tree.push(next);
    queue.push(...childrenOf(next));
  }
  return tree;
}

/** Polls until every pid is gone or the deadline passes; returns the ones still alive. */
export async function waitGone(pids: readonly number[], deadlineMs: number): Promise<number[]> {
  const until = performance.now() + deadlineMs;
  let alive = pids.filter(isAlive);
  while (alive.length > 0 && performance.now() < until) {
    await Bun.sleep(10);
    alive = alive.filter(isAlive);
  }
  return alive;
}

/** Proportional set size of a process in KiB (shared pages split among the processes mapping them). */
export function pssKiB(pid: number): number | undefined {
  const rollup = read(`/proc/${pid}/smaps_rollup`);
  const match = rollup?.match(/^Pss:\s+(\d+)\s+kB$/m);
  return match ? Number(match[1]) : undefined;
}

export interface TreeMemory {
  /** Sum of Pss over the process and its descendants, in KiB: the memory the tree really costs. */
  pss: number;
  /** Sum of VmRSS over the same processes, in KiB: counts pages they share once per process. */
  rss: number;
  processes: number;
}

/** PSS and RSS summed over a process tree; processes that vanish mid-read are skipped. */
export function treeMemory(pid: number): TreeMemory {
  const memory: TreeMemory = { pss: 0, rss: 0, processes: 0 };
  for (const member of processTree(pid)) {
    const pss = pssKiB(member);
    const rss = rssKiB(member);
    if (pss === undefined || rss === undefined) continue;
    memory.pss += pss;
    memory.rss += rss;
    memory.processes++;
  }
  return memory;
}

export interface CpuUse {
  /** Time on a CPU in microseconds, all threads (/proc/<pid>/task/<tid>/schedstat). */
  cpuUs: number;
  /** Voluntary context switches, all threads: each is a sleep, so about one wake-up per message. */
  wakeups: number;
}

/** CPU time and voluntary context switches of a process so far, summed over its threads. */
export function cpuUse(pid: number): CpuUse {
  const use: CpuUse = { cpuUs: 0, wakeups: 0 };
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return use;
  }
  for (const task of tasks) {
    const schedstat = read(`/proc/${pid}/task/${task}/schedstat`);
    const status = read(`/proc/${pid}/task/${task}/status`);
    use.cpuUs += Number(schedstat?.split(" ")[0] ?? 0) / 1000;
    use.wakeups += Number(status?.match(/^voluntary_ctxt_switches:\s+(\d+)$/m)?.[1] ?? 0);
  }
  return use;
}
