// The sandbox's filesystem rules, applied by the server itself. Some paths a contained cell names are
// opened by the server, outside the sandbox (`artifact(path=...)`, `artifact_save`, the artifact tools):
// they get the same answer the sandbox would give the cell, checked on the real path (links followed).
import { realpathSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { FilesystemLists, PathEntry } from "./runtime.ts";

const GLOB = /[*?[\]]/;

/** One list of entries: names match themselves and what is beneath them; patterns match by glob. */
class Places {
  private readonly names: string[] = [];
  private readonly patterns: Bun.Glob[] = [];

  constructor(entries: PathEntry[]) {
    for (const entry of entries) {
      const path = typeof entry === "string" ? entry : entry.path;
      if (typeof entry === "string" && GLOB.test(path)) this.patterns.push(new Bun.Glob(path));
      else this.names.push(path.length > 1 ? path.replace(/\/+$/, "") : path);
    }
  }

  has(path: string): boolean {
    return (
      this.names.some((name) => path === name || path.startsWith(name === "/" ? "/" : `${name}/`)) ||
      this.patterns.some((pattern) => pattern.match(path))
    );
  }
}

export interface Refusal {
  path: string;
  reason: string;
}

export class PathRules {
  private readonly readDenied: Places;
  private readonly readAllowed: Places;
  private readonly writable: Places;
  private readonly writeDenied: Places;

  constructor(lists: FilesystemLists) {
    this.readDenied = new Places(lists.denyRead);
    this.readAllowed = new Places(lists.allowRead);
    this.writable = new Places(lists.allowWrite);
    this.writeDenied = new Places(lists.denyWrite);
  }

  /** Why a contained cell may not read `path` (its real path, and why), or undefined. */
  refusesRead(path: string): Refusal | undefined {
    const real = realPath(path);
    // A writable place is bound back over a denied one, readable too (a worker's own TMPDIR).
    if (this.readDenied.has(real) && !this.readAllowed.has(real) && !this.writable.has(real)) {
      return { path: real, reason: "is a place the sandbox keeps unreadable (credentials, secrets)" };
    }
    return undefined;
  }

  /** Why a contained cell may not write `path` (made or replaced), or undefined. */
  refusesWrite(path: string): Refusal | undefined {
    const real = realPath(path);
    if (this.writeDenied.has(real)) return { path: real, reason: "is never writable in the sandbox" };
    if (!this.writable.has(real)) return { path: real, reason: "is outside the sandbox's writable places" };
    return undefined;
  }
}

/** The path with every link resolved; for a name that does not exist yet, its directory's. */
function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = dirname(path);
    return parent === path ? path : join(realPath(parent), basename(path));
  }
}
