// Where repl-mcp keeps per-user files that are not the user's documents: the cache (the worker's source
// and compiled code) and the runtime directory (a generated HTTP token, gone at logout). Both follow the
// XDG base directory rules; only absolute XDG paths count, as the specification says.
import { lstatSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";

export function cacheDirectory(): string {
  const xdg = process.env.XDG_CACHE_HOME;
  if (xdg?.startsWith("/")) return join(xdg, "repl-mcp");
  const home = process.env.HOME || homedir();
  if (home) return join(home, ".cache", "repl-mcp");
  return join(tmpdir(), `repl-mcp-${process.getuid?.() ?? "user"}`);
}

/**
 * $XDG_RUNTIME_DIR/repl-mcp when that directory exists and is ours, else `run` in the cache directory:
 * a directory of its own either way, so that everything secret repl-mcp keeps while it runs (generated
 * tokens, the viewers' addresses, parked sessions) is in one place a contained cell can be denied.
 */
export function runtimeDirectory(): string {
  const xdg = process.env.XDG_RUNTIME_DIR;
  if (xdg?.startsWith("/")) {
    try {
      const stat = lstatSync(xdg);
      if (stat.isDirectory() && stat.uid === process.geteuid?.()) return join(xdg, "repl-mcp");
    } catch {
      // Set but missing (a session that ended, a `sudo` that kept it): fall back.
    }
  }
  return join(cacheDirectory(), "run");
}
