// Bringing worker.py's engine into a kernel: its source is executed as the module `repl_mcp_engine`
// (kept in sys.modules, replaced when a different version is found there), the project directory is
// entered if one was named, and the engine says what a worker's ready frame says. Nothing else is left
// in the kernel: the loader deletes itself from the namespace.
import * as v from "valibot";
import { ReplError } from "../errors.ts";
import { KERNEL_PYTHON_MIN, KERNEL_REQUEST_TIMEOUT_MS } from "../limits.ts";
import { withTimeout } from "../timeout.ts";
import { ReadyFrame } from "../worker/frames.ts";
import { workerSource } from "../worker/source.ts";
import type { KernelLink } from "./jupyter.ts";

const Loaded = v.object({
  ...ReadyFrame.entries,
  cwd: v.string(),
  /** Runs can be sent as comm messages (the kernel registered the engine's comm target). */
  comm: v.optional(v.boolean(), false),
});
export type EngineReady = v.InferOutput<typeof Loaded>;

// Run with exec() in a dictionary of its own (source, digest, cwd given), so no name is left behind. The
// engine's compiled code is cached on the kernel's host as the local worker's is here (a private
// directory, the code behind its own SHA-256): compiling 230 KB of source costs a kernel ~90 ms per start.
const LOADER = [
  "import os, sys, types, marshal",
  "engine = sys.modules.get('repl_mcp_engine')",
  "if getattr(engine, '__repl_mcp_digest__', None) != digest:",
  "    code = None",
  "    try:",
  "        from hashlib import sha256",
  "        base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')",
  "        folder = os.path.join(base, 'repl-mcp')",
  "        path = os.path.join(folder, 'engine-%s.%s.code' % (digest[:24], sys.implementation.cache_tag))",
  "        os.makedirs(folder, mode=0o700, exist_ok=True)",
  "        st = os.lstat(folder)",
  "        private = (st.st_mode & 0o170000) == 0o040000 and st.st_uid == os.getuid() and not st.st_mode & 0o077",
  "    except Exception:",
  "        private = False",
  "    if private:",
  "        try:",
  "            with open(path, 'rb') as f:",
  "                data = f.read()",
  "            if sha256(data[32:]).digest() == data[:32]:",
  "                code = marshal.loads(data[32:])",
  "        except Exception:",
  "            code = None",
  "    if code is None and source is None:",
  "        raise LookupError('repl-mcp engine source needed')",
  "    if code is None:",
  "        code = compile(source, '<repl-mcp worker>', 'exec')",
  "        if private:",
  "            try:",
  "                data = marshal.dumps(code)",
  "                tmp = '%s.%d.tmp' % (path, os.getpid())",
  "                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)",
  "                with os.fdopen(fd, 'wb') as f:",
  "                    f.write(sha256(data).digest() + data)",
  "                os.replace(tmp, path)",
  "            except Exception:",
  "                pass",
  "    engine = types.ModuleType('repl_mcp_engine')",
  "    engine.__repl_mcp_digest__ = digest",
  "    exec(code, engine.__dict__)",
  "    sys.modules['repl_mcp_engine'] = engine",
  "if cwd is not None:",
  "    os.chdir(cwd)",
].join("\n");

/**
 * The loader as a user expression: evaluated by eval() after an empty cell, so the 230 KB of source
 * skip IPython's input transformers (and the kernel's history).
 */
function loaderExpression(cwd: string | undefined, withSource: boolean): string {
  const { text, digest } = workerSource();
  const source = withSource ? JSON.stringify(text) : "None";
  const scope = `{'__builtins__': __import__('builtins'), 'source': ${source}, 'digest': ${JSON.stringify(digest)}, 'cwd': ${cwd === undefined ? "None" : JSON.stringify(cwd)}}`;
  return `__import__('builtins').exec(${JSON.stringify(LOADER)}, ${scope})`;
}

/**
 * Checks the kernel's language and version, then loads the engine; rejects with what is wrong. The
 * first request names the engine without its source (found in the kernel or its host's cache); only
 * when that misses are the 230 KB sent. It is sent first, the question for the language and version
 * right behind it, so neither waits for the other's round trip.
 */
export async function loadEngine(
  kernel: KernelLink,
  label: string,
  cwd: string | undefined,
): Promise<EngineReady> {
  const request = (withSource: boolean) =>
    withTimeout(
      kernel.evaluate({
        load: loaderExpression(cwd, withSource),
        ready: "__import__('repl_mcp_engine').kernel_ready()",
        cwd: "__import__('os').getcwd()",
      }),
      KERNEL_REQUEST_TIMEOUT_MS,
      () => {
        throw new ReplError(
          "WORKER_START_FAILED",
          `Loading repl-mcp's engine into the kernel (${label}) timed out`,
        );
      },
    );
  const first = request(false);
  first.catch(() => {});
  const info = await withTimeout(kernel.info(), KERNEL_REQUEST_TIMEOUT_MS, () => {
    throw new ReplError("WORKER_START_FAILED", `The kernel (${label}) did not say which language it runs`);
  });
  if (info.language.toLowerCase() !== "python") {
    throw new ReplError(
      "PYTHON_UNSUPPORTED",
      `The kernel (${label}) runs ${info.language || "an unknown language"}, not Python; choose a Python kernelspec`,
    );
  }
  const [major = 0, minor = 0] = info.version.split(".").map(Number);
  const [wantMajor, wantMinor] = KERNEL_PYTHON_MIN;
  if (major < wantMajor || (major === wantMajor && minor < wantMinor)) {
    throw new ReplError(
      "PYTHON_UNSUPPORTED",
      `The kernel (${label}) runs Python ${info.version}; repl-mcp needs ${wantMajor}.${wantMinor} or newer`,
    );
  }
  let executed = await first;
  if (executed.userExpressions.load?.ename === "LookupError") executed = await request(true);
  const { load, ready, cwd: where } = executed.userExpressions;
  if (executed.status !== "ok" || load?.status !== "ok" || ready?.status !== "ok" || where?.status !== "ok") {
    const unusable = ["FileNotFoundError", "NotADirectoryError", "PermissionError"];
    if (cwd !== undefined && unusable.includes(load?.ename ?? "")) {
      throw new ReplError(
        "PROJECT_INVALID",
        `The project directory ${cwd} cannot be entered on the kernel's host (${label}); paths are the kernel's`,
      );
    }
    const why = load?.ename ?? ready?.ename ?? where?.ename ?? executed.status;
    throw new ReplError(
      "WORKER_START_FAILED",
      `repl-mcp's engine did not load in the kernel (${label}): ${why}`,
    );
  }
  const fields = JSON.parse(atob(pythonString(ready)));
  const parsed = v.safeParse(Loaded, { ...fields, cwd: pythonString(where) });
  if (!parsed.success) {
    throw new ReplError("WORKER_START_FAILED", `The kernel's engine (${label}) answered an unreadable ready`);
  }
  return parsed.output;
}

/** A user expression's value is its repr; for a str that is the text in quotes, escapes Python's. */
function pythonString(value: { data?: Record<string, unknown> }): string {
  const repr = String(value.data?.["text/plain"] ?? "");
  const quote = repr[0];
  if ((quote !== "'" && quote !== '"') || repr.at(-1) !== quote) return repr;
  // Python's repr of a str escapes like JSON for what matters here, apart from the quote it chose.
  const body = repr
    .slice(1, -1)
    .replace(/\\'/g, "'")
    .replace(/"/g, '\\"')
    .replace(/\\x([0-9a-f]{2})/g, "\\u00$1");
  try {
    return JSON.parse(`"${body}"`);
  } catch {
    return repr.slice(1, -1);
  }
}
