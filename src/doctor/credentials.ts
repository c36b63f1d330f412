// OAuth credentials of the registry's entries, as the OAuth module sees them on disk: present or not,
// mode, expiry, whether a refresh is possible. Never a token or a secret, only facts about them.
import type { Broker } from "../broker/broker.ts";
import { credentialStatus } from "../broker/oauth/status.ts";
import { type Finding, note, ok, problem, type Section } from "./report.ts";

export function credentialsSection(
  broker: Broker,
  fill: (action: string, server: string) => string,
): Section {
  const items: Record<string, unknown>[] = [];
  const findings: Finding[] = [];
  for (const entry of broker.serverEntries()) {
    const status = credentialStatus(entry);
    if (!status) continue;
    items.push({ server: entry.name, ...status });
    if (status.grant === "client_credentials") {
      findings.push(note(`${entry.name}: client credentials; a token is requested at each connect`));
      continue;
    }
    const where = `${entry.name}: ${status.file}${status.mode ? ` (mode ${status.mode})` : ""}`;
    for (const found of status.problems) {
      findings.push(problem(`${where}: ${found.problem}`, fill(found.action, entry.name)));
    }
    if (status.problems.length > 0) continue;
    const expiry =
      status.expires_at === null
        ? "no expiry recorded"
        : `access token expires ${new Date(status.expires_at * 1000).toISOString()}`;
    findings.push(ok(`${where}: ${expiry}${status.expired ? "; refreshed at the next connect" : ""}`));
  }
  if (findings.length === 0) findings.push(note("No OAuth entries in the registry"));
  return { title: "OAuth credentials", data: items, findings };
}
