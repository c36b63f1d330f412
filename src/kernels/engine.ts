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

const Loaded = v.object({ ...ReadyFrame.entries, cwd: v.string() });
export type EngineReady = v.InferOutput<typeof Loaded>;

function loaderCode(cwd: string | undefined): string {
  const { text, digest } = workerSource();
  return [
    "def __repl_mcp_load(source, digest, cwd):",
    "    import os, sys, types",
    "    engine = sys.modules.get('repl_mcp_engine')",
    "    if getattr(engine, '__repl_mcp_digest__', None) != digest:",
    "        engine = types.ModuleType('repl_mcp_engine')",
    "        engine.__repl_mcp_digest__ = digest",
    "        exec(compile(source, '<repl-mcp worker>', 'exec'), engine.__dict__)",
    "        sys.modules['repl_mcp_engine'] = engine",
    "    if cwd is not None:",
    "        os.chdir(cwd)",
    `__repl_mcp_load(${JSON.stringify(text)}, ${JSON.stringify(digest)}, ${cwd === undefined ? "None" : JSON.stringify(cwd)})`,
    "del __repl_mcp_load",
  ].join("\n");
}

/** Checks the kernel's language and version, then loads the engine; rejects with what is wrong. */
export async function loadEngine(
  kernel: KernelLink,
  label: string,
  cwd: string | undefined,
): Promise<EngineReady> {
  const info = await kernel.info();
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
  const executed = await withTimeout(
    kernel.execute(loaderCode(cwd), {
      userExpressions: {
        ready: "__import__('repl_mcp_engine').kernel_ready()",
        cwd: "__import__('os').getcwd()",
      },
    }),
    KERNEL_REQUEST_TIMEOUT_MS,
    () => {
      throw new ReplError(
        "WORKER_START_FAILED",
        `Loading repl-mcp's engine into the kernel (${label}) timed out`,
      );
    },
  );
  const ready = executed.userExpressions.ready;
  const where = executed.userExpressions.cwd;
  if (executed.status !== "ok" || ready?.status !== "ok" || where?.status !== "ok") {
    if (cwd !== undefined && where?.status !== "ok") {
      throw new ReplError(
        "PROJECT_INVALID",
        `The project directory ${cwd} cannot be entered on the kernel's host (${label}); paths are the kernel's`,
      );
    }
    const why = ready?.ename ?? where?.ename ?? executed.status;
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
