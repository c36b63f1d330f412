// --sandbox on this machine: the programs it needs, and a contained probe that must be refused a denied
// read and a write outside its places. Without --sandbox the answer is a note (would it work here?);
// with it, whatever stops it is a problem, with what to install or change.

import { resolve } from "node:path";
import type { DoctorOptions } from "../cli/command.ts";
import { BUILTIN_SANDBOX } from "../cli/command.ts";
import { describe } from "../errors.ts";
import { type Finding, note, ok, problem, type Section } from "./report.ts";

const LINUX_TOOLS = [
  { name: "bwrap", package: "bubblewrap", needed: true },
  { name: "socat", package: "socat", needed: true },
  { name: "rg", package: "ripgrep", needed: true },
  { name: "setpriv", package: "util-linux", needed: false },
] as const;

export async function sandboxSection(
  options: DoctorOptions,
  project: string,
  kernelFiles: string[],
): Promise<Section> {
  const requested = options.sandbox !== undefined;
  const findings: Finding[] = [];
  const tools: Record<string, string | null> = {};
  if (process.platform === "linux") {
    for (const tool of LINUX_TOOLS) {
      const path = Bun.which(tool.name);
      tools[tool.name] = path;
      if (path) findings.push(ok(`${tool.name}: ${path}`));
      else if (tool.needed) {
        const text = `${tool.name} is not installed`;
        const action = `Install ${tool.package} (Debian, Ubuntu: apt-get install ${tool.package})`;
        findings.push(requested ? problem(text, action) : note(`${text}; --sandbox needs it`, action));
      } else {
        findings.push(
          note(
            `${tool.name} is not installed: a proxy bridge would outlive a server killed with SIGKILL`,
            `Install ${tool.package}`,
          ),
        );
      }
    }
  }
  const data: Record<string, unknown> = { requested, tools, contains: false };
  const missing =
    process.platform === "linux" && LINUX_TOOLS.some((tool) => tool.needed && !tools[tool.name]);
  if (!missing) {
    // Loaded only here: the runtime and its proxy start for the probe and stop after it.
    const { containCells } = await import("../sandbox/start.ts");
    try {
      const sandbox = await containCells({
        policy:
          options.sandbox === undefined || options.sandbox === BUILTIN_SANDBOX
            ? undefined
            : resolve(project, options.sandbox),
        project,
        config: options.config === undefined ? undefined : resolve(project, options.config),
        journal: options.journal === undefined ? undefined : resolve(project, options.journal),
        kernelFiles,
      });
      data.contains = true;
      data.policy = sandbox.policy.source;
      findings.push(
        ok(
          `A contained probe ran and was refused a denied read and a write outside its places (policy: ${sandbox.policy.source})`,
        ),
      );
      await sandbox.stop();
    } catch (error) {
      const text = describe(error);
      const action = 'See docs/sandbox.md, "When --sandbox refuses to start"';
      findings.push(requested ? problem(text, action) : note(`${text}`, action));
    }
  }
  if (!requested)
    findings.push(note("Cells are not contained: pass --sandbox to contain them (docs/sandbox.md)"));
  return { title: "Sandbox", data, findings };
}
