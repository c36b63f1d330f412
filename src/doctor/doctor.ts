// `repl-mcp doctor`: what the server would do in this directory, checked without starting a worker or
// connecting anywhere (unless --connect names one server). Text for people, --json for scripts; the
// exit status is 1 when any finding is a problem.
import { realpathSync } from "node:fs";
import { palette } from "../cli/colour.ts";
import type { DoctorOptions } from "../cli/command.ts";
import { NAME, VERSION } from "../version.ts";
import { brokerFor, connectSection, personalise, registrySection } from "./broker.ts";
import { credentialsSection } from "./credentials.ts";
import { interpreterSection } from "./interpreter.ts";
import { journalSection } from "./journal.ts";
import { kernelFiles, kernelsSection } from "./kernels.ts";
import { parkingSection } from "./parking.ts";
import type { Finding, Section } from "./report.ts";
import { sandboxSection } from "./sandbox.ts";

export async function doctor(options: DoctorOptions): Promise<number> {
  const project = realpathSync(process.cwd());
  const broker = brokerFor(options, project);
  const sections: Record<string, Section> = {};
  try {
    sections.python = await interpreterSection(options, project);
    sections.registry = registrySection(options, project, broker);
    sections.credentials = credentialsSection(broker, (action, server) =>
      personalise(action, options, project, server),
    );
    sections.journal = journalSection(options.journal, project);
    const kernels = await kernelsSection(options.kernels, project);
    if (kernels) sections.kernels = kernels;
    sections.sandbox = await sandboxSection(options, project, kernelFiles(options.kernels, project));
    sections.kept = parkingSection();
    if (options.connect !== undefined) sections.connect = await connectSection(broker, options.connect);
  } finally {
    await broker.close();
  }
  const problems = Object.values(sections).flatMap((section) =>
    section.findings
      .filter((finding) => finding.level === "problem")
      .map((finding) => ({ section, finding })),
  );
  if (options.json) {
    const report: Record<string, unknown> = { ok: problems.length === 0, version: VERSION, project };
    for (const [key, section] of Object.entries(sections)) {
      report[key] = { ...wrap(section.data), findings: section.findings };
    }
    report.problems = problems.map(({ section, finding }) => ({
      section: section.title,
      problem: finding.text,
      action: finding.action,
    }));
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    process.stdout.write(render(project, Object.values(sections), problems.length));
  }
  return problems.length === 0 ? 0 : 1;
}

/** Arrays (the credential list) become `{items}` so every section is an object with its findings. */
const wrap = (data: unknown) => (Array.isArray(data) ? { items: data } : (data as Record<string, unknown>));

function render(project: string, sections: Section[], problems: number): string {
  const paint = palette(process.stdout);
  const mark = (finding: Finding) =>
    finding.level === "ok"
      ? paint.green("ok")
      : finding.level === "problem"
        ? paint.red("!!")
        : paint.dim("--");
  const lines = [`${paint.bold(`${NAME} doctor`)} ${VERSION}, project ${project}`, ""];
  for (const section of sections) {
    lines.push(paint.bold(section.title));
    for (const finding of section.findings) {
      lines.push(`  ${mark(finding)} ${finding.text}`);
      if (finding.action) lines.push(`     ${paint.cyan("fix:")} ${finding.action}`);
    }
    lines.push("");
  }
  lines.push(
    problems === 0
      ? paint.green("No problems found.")
      : paint.red(`${problems} problem${problems === 1 ? "" : "s"} found; each is marked !! with its fix.`),
    "",
  );
  return lines.join("\n");
}
