// The sandbox protects a file by mounting over it (read-only, or /dev/null for a denied read) when its
// worker starts. A mount holds the file it was made on: if a program on this host replaces that file by
// a rename (`git config` rewrites .git/config so, editors save so, another sandbox removes the
// placeholders it made), the name inside the sandbox reaches the new, unprotected file. A worker lives
// for hours, so this is watched: when a protected name stops being the file it was at the start, the
// worker is stopped (docs/sandbox.md). Its next cell starts a fresh worker, wrapped around the new file.
import { type FSWatcher, lstatSync, watch } from "node:fs";
import { basename, dirname } from "node:path";
import { log } from "../log.ts";

/** Which file a protected name was when the worker started. */
interface Protected {
  path: string;
  inode: number;
  device: number;
}

export class ProtectionWatch {
  private readonly watchers: FSWatcher[] = [];
  private breached = false;

  /** Watches the names among `paths` that exist now; `onBreach` is told the first one replaced. */
  constructor(paths: Iterable<string>, onBreach: (path: string) => void) {
    const byDirectory = new Map<string, Protected[]>();
    for (const path of new Set(paths)) {
      const stat = statOf(path);
      if (!stat) continue;
      const entries = byDirectory.get(dirname(path)) ?? [];
      entries.push({ path, inode: stat.ino, device: stat.dev });
      byDirectory.set(dirname(path), entries);
    }
    for (const [directory, entries] of byDirectory) {
      const names = new Set(entries.map((entry) => basename(entry.path)));
      try {
        const watcher = watch(directory, { persistent: false }, (_event, name) => {
          if (this.breached || (name !== null && !names.has(String(name)))) return;
          const replaced = entries.find((entry) => {
            const now = statOf(entry.path);
            return !now || now.ino !== entry.inode || now.dev !== entry.device;
          });
          if (!replaced) return;
          this.breached = true;
          this.close();
          onBreach(replaced.path);
        });
        watcher.on("error", () => {});
        this.watchers.push(watcher);
      } catch (error) {
        log.debug(`sandbox: cannot watch ${directory}:`, error);
      }
    }
  }

  close(): void {
    for (const watcher of this.watchers.splice(0)) watcher.close();
  }
}

function statOf(path: string): { ino: number; dev: number } | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}
