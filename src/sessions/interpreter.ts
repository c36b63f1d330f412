// Which Python the server starts by default (contract §6.6): an explicit --python / REPL_MCP_PYTHON,
// else a python beside the binary (an install that ships its own environment), else python3 on PATH.
import { accessSync, constants, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { ReplError } from "../errors.ts";

export type InterpreterSource = "explicit" | "beside_binary" | "path";

export interface Interpreter {
  /** The path the worker is started with (not symlink-resolved, so a venv keeps its identity). */
  path: string;
  source: InterpreterSource;
  /** Set when no usable interpreter was found; execution then fails with this message. */
  problem?: string;
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function compiledBinaryDir(): string | undefined {
  const compiled = Bun.main.startsWith("/$bunfs/") || Bun.main.startsWith("B:/~BUN");
  return compiled ? dirname(process.execPath) : undefined;
}

/** Never throws: a missing interpreter is reported when Python is needed, not at startup. */
export function selectDefaultInterpreter(requested: string | undefined, launchDir: string): Interpreter {
  try {
    return select(requested, launchDir);
  } catch (error) {
    return {
      path: requested ?? "python3",
      source: requested ? "explicit" : "path",
      problem: (error as Error).message,
    };
  }
}

function select(requested: string | undefined, launchDir: string): Interpreter {
  if (requested) {
    let path: string | undefined;
    if (isAbsolute(requested)) path = requested;
    else if (requested.includes("/")) path = resolve(launchDir, requested);
    else path = Bun.which(requested) ?? undefined;
    if (!path) {
      throw new ReplError(
        "PYTHON_NOT_FOUND",
        `Requested Python executable was not found on PATH: ${requested}`,
      );
    }
    if (!isExecutableFile(path)) {
      throw new ReplError(
        "PYTHON_NOT_EXECUTABLE",
        `Requested Python executable is not an executable file: ${path}`,
      );
    }
    return { path, source: "explicit" };
  }
  const beside = compiledBinaryDir();
  if (beside) {
    for (const name of ["python", "python3"]) {
      const candidate = join(beside, name);
      if (isExecutableFile(candidate)) return { path: candidate, source: "beside_binary" };
    }
  }
  const onPath = Bun.which("python3");
  if (!onPath) {
    throw new ReplError(
      "PYTHON_NOT_FOUND",
      "No python3 on PATH; install CPython 3.10+ or pass --python /absolute/path/to/python",
    );
  }
  return { path: onPath, source: "path" };
}
