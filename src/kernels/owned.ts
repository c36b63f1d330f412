// The private record of the kernels this server started, so that none outlives it. Each server writes
// its own file (<cache>/kernels/<pid>-<random>.json: server name, url and kernel id per kernel, never a
// token) and removes it when it exits. A file whose process is gone is what a crash (kill -9) left: the
// next server to start shuts those kernels down on the servers it is configured for, then removes it.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { describe } from "../errors.ts";
import { writePrivateFileAtomic } from "../fs/atomic.ts";
import { ensurePrivateDirectory } from "../fs/private-dir.ts";
import { cacheDirectory } from "../fs/user-dirs.ts";
import { log } from "../log.ts";
import type { KernelServer } from "./config.ts";

const Record = v.object({
  pid: v.number(),
  kernels: v.array(v.object({ server: v.string(), url: v.string(), id: v.string() })),
});
type Entry = v.InferOutput<typeof Record>["kernels"][number];

export class OwnedKernels {
  private readonly entries: Entry[] = [];
  private readonly path: string | undefined;

  constructor(private readonly dir = join(cacheDirectory(), "kernels")) {
    try {
      ensurePrivateDirectory(dir, "The kernel record directory");
      this.path = join(dir, `${process.pid}-${crypto.randomUUID().slice(0, 8)}.json`);
    } catch (error) {
      log.warn(
        `kernels this server starts are not recorded (${describe(error)}); a crash may leave them running`,
      );
    }
  }

  add(server: KernelServer, id: string): void {
    this.entries.push({ server: server.name, url: server.url, id });
    this.write();
  }

  remove(id: string): void {
    const at = this.entries.findIndex((entry) => entry.id === id);
    if (at < 0) return;
    this.entries.splice(at, 1);
    this.write();
  }

  /**
   * The kernels that servers which are no longer running left behind, on the servers given (matched by
   * name and url); their records are removed once `shutdown` settled for each of their kernels.
   */
  async collectOrphans(
    servers: readonly KernelServer[],
    shutdown: (server: KernelServer, id: string) => Promise<void>,
  ): Promise<number> {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((name) => name.endsWith(".json"));
    } catch {
      return 0;
    }
    let stopped = 0;
    for (const name of names) {
      const path = join(this.dir, name);
      if (path === this.path) continue;
      let record: v.InferOutput<typeof Record>;
      try {
        record = v.parse(Record, JSON.parse(readFileSync(path, "utf8")));
      } catch {
        continue; // being written, or not ours to judge
      }
      if (alive(record.pid)) continue;
      const left: Entry[] = [];
      for (const entry of record.kernels) {
        const server = servers.find(
          (candidate) => candidate.name === entry.server && candidate.url === entry.url,
        );
        if (!server) {
          left.push(entry);
          continue;
        }
        try {
          await shutdown(server, entry.id);
          stopped++;
        } catch (error) {
          log.warn(
            `a kernel left by an earlier repl-mcp on "${server.name}" was not shut down: ${describe(error)}`,
          );
          left.push(entry);
        }
      }
      if (left.length === 0) rmSync(path, { force: true });
      else writePrivateFileAtomic(path, JSON.stringify({ pid: record.pid, kernels: left }));
    }
    return stopped;
  }

  private write(): void {
    if (!this.path) return;
    if (this.entries.length === 0) {
      rmSync(this.path, { force: true });
      return;
    }
    try {
      writePrivateFileAtomic(this.path, JSON.stringify({ pid: process.pid, kernels: this.entries }));
    } catch (error) {
      log.warn(`the record of started kernels could not be written: ${describe(error)}`);
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}
