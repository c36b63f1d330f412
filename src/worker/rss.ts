// Resident set size of one process, for the worker's memory budget. Linux reads /proc; other systems
// have no cheap equivalent here and report nothing (the budget is then not enforced, see README).
import { readFileSync } from "node:fs";

const PAGE_BYTES = 4096;

export function residentBytes(pid: number): number | undefined {
  try {
    const statm = readFileSync(`/proc/${pid}/statm`, "latin1");
    const pages = Number(statm.split(" ")[1]);
    return Number.isFinite(pages) ? pages * PAGE_BYTES : undefined;
  } catch {
    return undefined;
  }
}
