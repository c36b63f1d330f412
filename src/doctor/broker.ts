// The broker as the server would load it here: which registry files the scope reads, each server with
// its grant and explain status, and (only with --connect) one live connection listing its tools.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { Broker } from "../broker/broker.ts";
import { Journal } from "../broker/journal.ts";
import type { Placement } from "../cli/command.ts";
import { describe } from "../errors.ts";
import { type Finding, note, ok, problem, type Section } from "./report.ts";

/** explain statuses that need the user; the others are normal before a first call. */
const BAD_STATUSES = new Set(["config_invalid", "credentials_missing", "connection_timeout"]);

/** The login command with this registry and server filled in, ready to paste. */
export function personalise(action: string, options: Placement, project: string, server: string): string {
  const registry =
    options.config === undefined ? join(project, ".mcp.json") : resolve(project, options.config);
  return action.replace("REGISTRY", registry).replace(/\bSERVER\b/, server);
}

export function brokerFor(options: Placement, project: string): Broker {
  const configPath = options.config === undefined ? undefined : resolve(project, options.config);
  return new Broker({ project, configPath, scopes: options.scopes, env: process.env }, new Journal());
}

function sources(options: Placement, project: string) {
  const home = process.env.HOME || homedir();
  const found: { scope: string; path: string; exists: boolean }[] = [];
  if (options.scopes.has("user") || options.scopes.has("local")) {
    const path = join(home, ".claude.json");
    const scopes = ["user", "local"].filter((scope) => options.scopes.has(scope as never)).join(",");
    found.push({ scope: scopes, path, exists: existsSync(path) });
  }
  if (options.scopes.has("project")) {
    const path = options.config === undefined ? join(project, ".mcp.json") : resolve(project, options.config);
    found.push({
      scope: options.config === undefined ? "project" : "config",
      path,
      exists: existsSync(path),
    });
  }
  return found;
}

export function registrySection(options: Placement, project: string, broker: Broker): Section {
  const health = broker.health();
  const findings: Finding[] = [];
  const files = sources(options, project);
  if (!health.enabled) {
    findings.push(note("The broker is disabled (--mcp-scope none or REPL_MCP_NO_BRIDGE=1)"));
  }
  for (const file of files) {
    findings.push(
      file.exists ? ok(`${file.scope}: ${file.path}`) : note(`${file.scope}: ${file.path} (absent)`),
    );
  }
  if (health.configuration_error) {
    findings.push(problem(`Registry error: ${health.configuration_error}`, "Repair the registry file"));
  }
  const servers = broker.serverEntries().map((entry) => {
    const explained = broker.explain(entry.name, null);
    const line = `${entry.name} (${entry.transport.type}, ${entry.scope}): ${explained.status}; ${explained.reason}`;
    findings.push(
      BAD_STATUSES.has(explained.status)
        ? problem(
            line,
            personalise(explained.actions.join("; ") || "Repair the entry", options, project, entry.name),
          )
        : ok(line),
    );
    return {
      name: entry.name,
      transport: entry.transport.type,
      scope: entry.scope,
      allowed_tools: entry.allowedTools ?? null,
      status: explained.status,
      reason: explained.reason,
      actions: explained.actions.map((action) => personalise(action, options, project, entry.name)),
    };
  });
  const excluded = [...broker.exclusions()].map(([name, reason]) => {
    findings.push(note(`${name}: not used (${reason === "self" ? "it is repl-mcp itself" : reason})`));
    return { name, reason };
  });
  if (health.enabled && !health.configuration_error && servers.length === 0) {
    findings.push(note("No MCP servers configured; cells can still run Python"));
  }
  return {
    title: `MCP registry (scope: ${health.provenance.scope})`,
    data: {
      scope: health.provenance.scope,
      enabled: health.enabled,
      sources: files,
      configuration_error: health.configuration_error,
      servers,
      excluded,
    },
    findings,
  };
}

export async function connectSection(broker: Broker, server: string): Promise<Section> {
  try {
    const tools = await broker.tools(server, 30);
    return {
      title: `Connect to ${server}`,
      data: { server, connected: true, tools: tools.map((tool) => tool.name), error: null },
      findings: [ok(`Connected; ${tools.length} tools: ${tools.map((tool) => tool.name).join(", ")}`)],
    };
  } catch (error) {
    return {
      title: `Connect to ${server}`,
      data: { server, connected: false, tools: [], error: describe(error) },
      findings: [
        problem(describe(error), `Check the "${server}" entry, its command or URL, and credentials`),
      ],
    };
  }
}
