// The kernel servers of --kernels: whether the file holds, and for each server one authenticated GET of
// its kernelspecs — did it answer, does it take the token, which kernels does it offer. No kernel starts.
import { resolve } from "node:path";
import * as v from "valibot";
import { describe } from "../errors.ts";
import { type KernelServer, kernelServerView, loadKernelServers } from "../kernels/config.ts";
import { KERNEL_PROBE_TIMEOUT_MS, KERNEL_SPECS_MAX_BYTES } from "../limits.ts";
import { type Finding, note, ok, problem, type Section } from "./report.ts";

const Specs = v.object({
  default: v.optional(v.string()),
  kernelspecs: v.record(
    v.string(),
    v.object({ spec: v.optional(v.object({ language: v.optional(v.string()) })) }),
  ),
});

export async function kernelsSection(
  kernels: string | undefined,
  project: string,
): Promise<Section | undefined> {
  if (kernels === undefined) return undefined;
  const path = resolve(project, kernels);
  let servers: KernelServer[];
  try {
    servers = loadKernelServers(path).servers;
  } catch (error) {
    return {
      title: "Kernel servers",
      data: { path },
      findings: [problem(describe(error), "Fix the kernel servers file (docs/kernels.md), then start again")],
    };
  }
  const probed = await Promise.all(servers.map(probe));
  return {
    title: "Kernel servers",
    data: { path, servers: probed.map(({ data }) => data) },
    findings: probed.flatMap(({ findings }) => findings),
  };
}

async function probe(server: KernelServer): Promise<{ data: Record<string, unknown>; findings: Finding[] }> {
  const data: Record<string, unknown> = { ...kernelServerView(server), answered: false };
  const findings: Finding[] = [];
  const label = `${server.name} (${server.url})`;
  if (server.insecure) findings.push(note(`${label}: ${kernelServerView(server).warning}`, "Use https"));
  let response: Response;
  try {
    response = await fetch(new URL("api/kernelspecs", server.url), {
      headers: server.authorization ? { authorization: server.authorization } : {},
      redirect: "manual",
      signal: AbortSignal.timeout(KERNEL_PROBE_TIMEOUT_MS),
      ...(server.ca ? { tls: { ca: server.ca } } : {}),
    });
  } catch (error) {
    findings.push(
      problem(
        `${label} did not answer (${describe(error)})`,
        "Check that the Jupyter server runs and the url",
      ),
    );
    return { data, findings };
  }
  data.answered = true;
  data.status = response.status;
  if (response.status >= 300 && response.status < 400) {
    findings.push(
      problem(
        `${label} redirected (HTTP ${response.status}), as to a login page`,
        'Check "token" and that "url" is the user server (…/user/<name>/), not the hub itself',
      ),
    );
    return { data, findings };
  }
  if (response.status === 401 || response.status === 403) {
    findings.push(
      problem(`${label} refused the token (HTTP ${response.status})`, 'Check "token" or "tokenFile"'),
    );
    return { data, findings };
  }
  if (!response.ok) {
    findings.push(
      problem(
        `${label} answered HTTP ${response.status} for its kernelspecs`,
        "Check the \"url\": the Jupyter server's base URL, with a JupyterHub user server's /user/<name>/",
      ),
    );
    return { data, findings };
  }
  const text = await response.text();
  let parsed: v.InferOutput<typeof Specs> | undefined;
  try {
    const result = v.safeParse(Specs, text.length <= KERNEL_SPECS_MAX_BYTES ? JSON.parse(text) : null);
    parsed = result.success ? result.output : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed) {
    findings.push(problem(`${label} answered, but not with a kernelspec list`, 'Check the "url"'));
    return { data, findings };
  }
  data.kernelspecs = Object.keys(parsed.kernelspecs).sort();
  data.default_kernel = parsed.default ?? null;
  findings.push(kernelFinding(label, server, parsed));
  return { data, findings };
}

/** Whether the kernel sessions would get is offered, and runs Python. */
function kernelFinding(label: string, server: KernelServer, specs: v.InferOutput<typeof Specs>): Finding {
  const names = Object.keys(specs.kernelspecs).sort();
  const wanted = server.kernel ?? specs.default;
  const language = wanted === undefined ? undefined : specs.kernelspecs[wanted]?.spec?.language;
  if (language !== undefined && language.toLowerCase() !== "python")
    return problem(
      `${label}: kernel "${wanted}" runs ${language}, not Python`,
      'Set "kernel" to a Python kernelspec',
    );
  if (wanted !== undefined && !names.includes(wanted))
    return problem(
      `${label} offers no kernel "${wanted}" (it has ${names.join(", ") || "none"})`,
      'Fix "kernel"',
    );
  return ok(`${label} answered; kernels: ${names.join(", ")}${wanted ? ` (sessions get ${wanted})` : ""}`);
}

/** The kernel servers file and its token files (what a contained cell may not read); none if it does not load. */
export function kernelFiles(kernels: string | undefined, project: string): string[] {
  if (kernels === undefined) return [];
  try {
    return loadKernelServers(resolve(project, kernels)).secretFiles;
  } catch {
    return [];
  }
}
