// A contained worker runs in pid namespaces of its own (docs/sandbox.md): the pid its ready frame gives
// is its pid in the innermost one, which means nothing out here. Signals and memory samples need its pid
// on this host: the descendant of the guardian's child whose innermost pid (the last of /proc's NSpid)
// is that one. Linux only; elsewhere there are no pid namespaces and the pid is already the host's.
import { readdirSync, readFileSync } from "node:fs";

/** The host pid of the process below `root` that calls itself `inner`; `inner` itself off Linux. */
export function hostPidOf(root: number, inner: number): number | undefined {
  if (process.platform !== "linux") return inner;
  const queue = [root];
  let best: { pid: number; depth: number } | undefined;
  for (let seen = 0; queue.length > 0 && seen < 256; seen++) {
    const pid = queue.shift() as number;
    const nspid = namespacePids(pid);
    if (nspid && nspid.length > 1 && nspid[nspid.length - 1] === inner) {
      if (!best || nspid.length > best.depth) best = { pid, depth: nspid.length };
    }
    queue.push(...childrenOf(pid));
  }
  return best?.pid;
}

function namespacePids(pid: number): number[] | undefined {
  try {
    const line = /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${pid}/status`, "latin1"))?.[1];
    return line?.trim().split(/\s+/).map(Number);
  } catch {
    return undefined;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      readFileSync(`/proc/${pid}/task/${task}/children`, "latin1")
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number),
    );
  } catch {
    return [];
  }
}
