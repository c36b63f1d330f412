// Python cannot open a path inside the binary's virtual filesystem, so the embedded worker is written
// once to a private, content-addressed cache file and run from there.
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import WORKER_FILE from "../../worker.py" with { type: "file" };
import { writePrivateFileAtomic } from "../fs/atomic.ts";

/**
 * Runs the file named by argv[1] as the main program, leaving sys.path[0] as for `python -c`. The
 * compiled code is kept beside the private source copy, per interpreter version (`cache_tag`), because
 * compiling the worker on every start costs more than the rest of its start-up. Any problem with the
 * cache just means compiling again.
 */
export const BOOTSTRAP = [
  "import sys, os, marshal",
  "__p = sys.argv.pop(1)",
  "__k = __p[:-3] + '.' + (sys.implementation.cache_tag or 'none') + '.code'",
  "try:",
  "    with open(__k, 'rb') as __f:",
  "        __c = marshal.load(__f)",
  "except Exception:",
  "    with open(__p, 'rb') as __f:",
  "        __c = compile(__f.read(), __p, 'exec')",
  "    try:",
  "        __t = '%s.%d.tmp' % (__k, os.getpid())",
  "        __d = os.open(__t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)",
  "        with os.fdopen(__d, 'wb') as __f:",
  "            marshal.dump(__c, __f)",
  "        os.replace(__t, __k)",
  "    except Exception:",
  "        pass",
  "del __p, __k, __f",
  "exec(__c)",
].join("\n");

function cacheDir(): string {
  const xdg = process.env.XDG_CACHE_HOME;
  if (xdg?.startsWith("/")) return join(xdg, "repl-mcp");
  const home = process.env.HOME || homedir();
  if (home) return join(home, ".cache", "repl-mcp");
  return join(tmpdir(), `repl-mcp-${process.getuid?.() ?? "user"}`);
}

let cached: string | undefined;

export function workerSourcePath(): string {
  if (cached && existsSync(cached)) return cached;
  // Read from the bundle only here, so its 120 KB never stay in the server's heap.
  const source = readFileSync(WORKER_FILE);
  const digest = new Bun.CryptoHasher("sha256").update(source).digest("hex");
  const dir = cacheDir();
  const path = join(dir, `worker-${digest.slice(0, 24)}.py`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  let intact = false;
  try {
    intact = new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex") === digest;
  } catch {}
  if (!intact) writePrivateFileAtomic(path, source);
  cached = path;
  return path;
}
