// Which Python the server starts by default (docs/cli.md "Which Python"): an explicit --python / REPL_MCP_PYTHON,
// else a python beside the binary (an install that ships its own environment), else python3 on PATH.
import { accessSync, constants, lstatSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { isCompiled } from "../binary.ts";
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
  return isCompiled() ? dirname(process.execPath) : undefined;
}

/** Where a requested interpreter is: an absolute path, a path relative to `base`, or a name on PATH. */
function locate(requested: string, base: string): string | undefined {
  if (isAbsolute(requested)) return requested;
  if (requested.includes("/")) return resolve(base, requested);
  return Bun.which(requested) ?? undefined;
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
    const path = locate(requested, launchDir);
    if (!path) {
      throw new ReplError(
        "PYTHON_NOT_FOUND",
        `Requested Python executable was not found on PATH: ${requested}`,
      );
    }
    if (!isExecutableFile(path)) {
      throw new ReplError(
        "PYTHON_NOT_FOUND",
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

export type EnvironmentSource = "explicit" | "project_venv" | "server_default" | "kernel_server";

/**
 * The interpreter of an opened session: an explicit `python` argument, else the project's .venv (if
 * .venv exists in any form it must work: a broken one fails rather than falling back), else the
 * server default. The selected path is kept as given (a venv's python is a symlink that must stay one).
 */
export function selectSessionInterpreter(
  requested: string | undefined,
  project: string,
  serverDefault: Interpreter,
): { path: string; source: EnvironmentSource } {
  if (requested !== undefined) {
    const path = locate(requested, project);
    if (!path) throw new ReplError("PYTHON_NOT_FOUND", "Requested Python executable was not found on PATH");
    requireExecutable(path);
    return { path, source: "explicit" };
  }
  const venv = join(project, ".venv");
  let venvExists = true;
  try {
    lstatSync(venv);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new ReplError("PYTHON_NOT_FOUND", "Cannot inspect the project .venv environment");
    }
    venvExists = false;
  }
  if (venvExists) {
    const path = join(venv, "bin", "python");
    if (!isExecutableFile(path)) {
      throw new ReplError(
        "PYTHON_NOT_FOUND",
        "Project .venv has no usable Python executable (.venv/bin/python is missing, a dangling link or " +
          "not executable); repair it (python3 -m venv --clear .venv) or pass python explicitly",
      );
    }
    return { path, source: "project_venv" };
  }
  if (serverDefault.problem) throw new ReplError("PYTHON_NOT_FOUND", serverDefault.problem);
  return { path: serverDefault.path, source: "server_default" };
}

function requireExecutable(path: string): void {
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
  } catch {
    throw new ReplError("PYTHON_NOT_FOUND", "Requested Python executable does not exist");
  }
  try {
    if (!isFile) throw new Error("not a file");
    accessSync(path, constants.X_OK);
  } catch {
    throw new ReplError("PYTHON_NOT_FOUND", "Requested Python executable is not executable");
  }
}
