// The environment of a server under test: PATH, and a HOME and XDG directories of its own, so nothing of
// the developer's is read and tests never see each other's files.
//
// A fresh cache directory would make every test server write the worker's source and compile it again
// (0.09 s of CPU each, hundreds of times a run). So tests/run.ts prepares one cache the way a server
// does, by running one cell, and names it in REPL_MCP_TEST_WORKER_CACHE; each fresh home gets a copy
// of those files (copies: a test that damages its cache must not damage the others'). The server checks them like any cache it finds (the source by its SHA-256, the
// compiled code by the hash in front of it), so a stale or foreign file is simply made again.
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

export const WORKER_CACHE_VARIABLE = "REPL_MCP_TEST_WORKER_CACHE";

/** PATH, HOME, XDG_CONFIG_HOME and XDG_CACHE_HOME under `home`, its cache seeded with the compiled worker. */
export function homeEnv(home: string): Record<string, string> {
  const cacheHome = join(home, ".cache");
  seedWorkerCache(join(cacheHome, "repl-mcp"));
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_CACHE_HOME: cacheHome,
    // A test's server lives for seconds: mimalloc's default, returning freed pages to the system after
    // 10 ms and faulting them in again at the next allocation, cost it about 4 % of its CPU for nothing.
    // Memory a test bounds can only read higher this way (nothing is returned before exit), never lower.
    MIMALLOC_PURGE_DELAY: "-1",
  };
}

function seedWorkerCache(dir: string): void {
  const seed = process.env[WORKER_CACHE_VARIABLE];
  if (!seed) return;
  let names: string[];
  try {
    names = readdirSync(seed).filter((name) => name.startsWith("worker-"));
  } catch {
    return;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const name of names) {
    copyFileSync(join(seed, name), join(dir, name));
  }
}
