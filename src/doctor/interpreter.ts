// Which Python the server would start here, why, and whether it works; and what a session opened on
// this project would use instead (its .venv), since a broken .venv fails those sessions.
import type { Placement } from "../cli/command.ts";
import { describe } from "../errors.ts";
import { childEnv } from "../guardian/env.ts";
import { selectDefaultInterpreter, selectSessionInterpreter } from "../sessions/interpreter.ts";
import { probeInterpreter } from "../sessions/probe.ts";
import { type Finding, ok, problem, type Section } from "./report.ts";

const WHY = {
  flag: "chosen by --python",
  env: "chosen by REPL_MCP_PYTHON",
  beside_binary: "found beside the repl-mcp binary",
  path: "python3 found on PATH",
} as const;

const VENV_FIX = "Repair it (python3 -m venv --clear .venv) or remove it";

async function probe(path: string, project: string) {
  try {
    const result = await probeInterpreter(path, project, childEnv(), undefined);
    return { version: result.version, executable: result.executable, error: null };
  } catch (error) {
    return { version: null, executable: null, error: describe(error) };
  }
}

export async function interpreterSection(options: Placement, project: string): Promise<Section> {
  const findings: Finding[] = [];
  const chosen = selectDefaultInterpreter(options.python, project);
  const why = chosen.source === "explicit" ? WHY[options.pythonFrom ?? "flag"] : WHY[chosen.source];
  const fix = "Install CPython 3.10+ or pass --python /absolute/path/to/python";
  const tested = chosen.problem ? null : await probe(chosen.path, project);
  if (chosen.problem) findings.push(problem(`Default interpreter: ${chosen.problem}`, fix));
  else if (tested?.error)
    findings.push(problem(`Default interpreter ${chosen.path} (${why}): ${tested.error}`, fix));
  else findings.push(ok(`Default interpreter ${chosen.path}, Python ${tested?.version} (${why})`));

  let venv: Record<string, unknown> = { state: "absent" };
  try {
    const session = selectSessionInterpreter(undefined, project, { ...chosen, problem: undefined });
    if (session.source === "project_venv") {
      const result = await probe(session.path, project);
      venv = { state: result.error ? "broken" : "ok", path: session.path, ...result };
      if (result.error) {
        findings.push(problem(`Project .venv is broken: ${result.error}`, VENV_FIX));
      } else {
        findings.push(ok(`Sessions opened on this project use ${session.path}, Python ${result.version}`));
      }
    }
  } catch (error) {
    venv = { state: "broken", error: describe(error) };
    findings.push(
      problem(`Project .venv is broken, so sessions opened here fail: ${describe(error)}`, VENV_FIX),
    );
  }
  return {
    title: "Python",
    data: {
      default: { path: chosen.path, source: chosen.source, reason: why, ...tested },
      project_venv: venv,
    },
    findings,
  };
}
