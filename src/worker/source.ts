// Python cannot open a path inside the binary's virtual filesystem, so the embedded worker is written
// once to a private, content-addressed cache file (fs/cached-copy.ts) and run from there; the compiled
// code beside it is checked against its hash.
import { existsSync, readFileSync } from "node:fs";
import WORKER_FILE from "../../worker.py" with { type: "file" };
import { cachedCopy } from "../fs/cached-copy.ts";

/**
 * Runs the file named by argv[1] as the main program, leaving sys.path[0] as for `python -c`. The
 * compiled code is kept beside the private source copy, per interpreter version (`cache_tag`), because
 * compiling the worker on every start costs more than the rest of its start-up. The code file is the
 * SHA-256 of the marshalled code, then that code: one that does not match (torn, stale, planted) is
 * never loaded, and any problem with the cache just means compiling again. `_sha2` (3.12+) and
 * `_sha256` are hashlib's own C modules, imported without the milliseconds hashlib itself costs.
 */
export const BOOTSTRAP = [
  "import sys, os, marshal",
  "try:",
  "    from _sha2 import sha256 as __h",
  "except ImportError:",
  "    try:",
  "        from _sha256 import sha256 as __h",
  "    except ImportError:",
  "        from hashlib import sha256 as __h",
  "__p = sys.argv.pop(1)",
  "__b = b''",
  "__k = __p[:-3] + '.' + (sys.implementation.cache_tag or 'none') + '.code'",
  "try:",
  "    with open(__k, 'rb') as __f:",
  "        __b = __f.read()",
  "    if __h(__b[32:]).digest() != __b[:32]:",
  "        raise ValueError('the compiled worker does not match its hash')",
  "    __c = marshal.loads(__b[32:])",
  "except Exception:",
  "    with open(__p, 'rb') as __f:",
  "        __c = compile(__f.read(), __p, 'exec')",
  "    try:",
  "        __b = marshal.dumps(__c)",
  "        __t = '%s.%d.tmp' % (__k, os.getpid())",
  "        __d = os.open(__t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)",
  "        with os.fdopen(__d, 'wb') as __f:",
  "            __f.write(__h(__b).digest() + __b)",
  "        os.replace(__t, __k)",
  "    except Exception:",
  "        pass",
  "del __p, __k, __f, __b, __h",
  "exec(__c)",
].join("\n");

/** The worker's source text and its SHA-256 (hex), read from the bundle (a kernel loads it as a module). */
export function workerSource(): { text: string; digest: string } {
  const source = readFileSync(WORKER_FILE);
  return {
    text: source.toString("utf8"),
    digest: new Bun.CryptoHasher("sha256").update(source).digest("hex"),
  };
}

let cached: string | undefined;

export function workerSourcePath(): string {
  if (cached && existsSync(cached)) return cached;
  // Read from the bundle only here, so its 120 KB never stay in the server's heap.
  cached = cachedCopy("worker", ".py", readFileSync(WORKER_FILE));
  return cached;
}
