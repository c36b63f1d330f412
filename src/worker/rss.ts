// Resident set size of one process, for the worker's memory budget. Linux reads /proc (VmRSS is in
// kB whatever the page size); other systems have no cheap equivalent here and report nothing (the
// budget is then not enforced, see docs/reliability.md).
import { readFileSync } from "node:fs";

export function residentBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "latin1");
    const kib = Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]);
    return Number.isFinite(kib) ? kib * 1024 : undefined;
  } catch {
    return undefined;
  }
}
