// mcp.explain: why a server or tool is (not) usable, from what the broker already knows. It never
// connects, never touches the network and never prints a configuration value. The checks run in the
// order a call meets them: the registry, the entry's policy, the connection, the tool catalogue.
import { existsSync } from "node:fs";
import { BROKER_ARGUMENT_MAX_BYTES, BROKER_CATALOGUE_TTL_MS, BROKER_RESULT_MAX_BYTES } from "../limits.ts";
import { needsApproval } from "./approval.ts";
import type { Catalogues } from "./catalogue.ts";
import { granted } from "./catalogue.ts";
import type { ServerEntry } from "./config.ts";
import type { ConnectionPool } from "./connections.ts";
import type { Registry } from "./registry.ts";

/** What a verdict rests on: one word, so an agent can tell a guess from an observation (§5.9). */
type Evidence = "configuration" | "transport_state" | "last_connection_attempt" | "cached_catalogue";

interface Verdict {
  status: string;
  reason: string;
  evidence: Evidence;
  actions: string[];
  connected: boolean;
}

function verdict(
  status: string,
  reason: string,
  evidence: Evidence,
  actions: string[],
  connected = false,
): Verdict {
  return { status, reason, evidence, actions, connected };
}

export function explain(
  registry: Registry,
  pool: ConnectionPool,
  catalogues: Catalogues,
  server: string,
  tool: string | null,
) {
  const entry = registry.servers.get(server);
  const found =
    registry.error || registry.disabled || !entry
      ? registryVerdict(registry, server)
      : (policyVerdict(entry, tool) ??
        connectionVerdict(pool, entry, server) ??
        catalogueVerdict(catalogues, entry, server, tool));
  return {
    server,
    tool,
    network_probe_performed: false,
    configuration_error: registry.error,
    budgets: { argument_max_bytes: BROKER_ARGUMENT_MAX_BYTES, result_max_bytes: BROKER_RESULT_MAX_BYTES },
    provenance: registry.provenance,
    host_client_route: {
      availability: "unknown",
      discoverable_by_broker: false,
      action:
        "Servers configured only in your MCP client are not visible here; add them to the broker registry",
    },
    approval: entry ? approvalOf(entry, catalogues, tool) : null,
    ...found,
  };
}

/**
 * Whether a call needs the person's approval (the entry's `approve`): `required` is null when it depends
 * on a tool not named, or on annotations of a catalogue not loaded yet.
 */
function approvalOf(entry: ServerEntry, catalogues: Catalogues, tool: string | null) {
  const rule = entry.approve ?? null;
  if (rule === null) return { rule, required: false };
  if (tool === null) return { rule, required: rule === "all" ? true : null };
  const definition = catalogues.cached(entry)?.tools.find((candidate) => candidate.name === tool);
  // Patterns and "all" read the name only; "writes" needs the tool's annotations.
  const required = definition
    ? needsApproval(entry, definition)
    : rule === "writes"
      ? null
      : needsApproval(entry, { name: tool, inputSchema: { type: "object" } });
  return { rule, required };
}

/** The registry is broken or off, or has no usable entry of that name. */
function registryVerdict(registry: Registry, server: string): Verdict {
  if (registry.error) {
    return verdict(
      registry.errorCode === "CREDENTIALS_MISSING" ? "credentials_missing" : "config_invalid",
      registry.error,
      "configuration",
      ["Repair the MCP registry, then call mcp.refresh()"],
    );
  }
  if (registry.disabled) {
    return verdict(
      "broker_disabled",
      "The broker is disabled (--mcp-scope none or REPL_MCP_NO_BRIDGE=1)",
      "configuration",
      ["Start repl-mcp with --mcp-scope project (the default) and without REPL_MCP_NO_BRIDGE=1"],
    );
  }
  const excluded = registry.excluded.get(server);
  if (excluded === "disabled" || excluded === "not_granted") {
    return verdict(
      "not_granted",
      excluded === "disabled"
        ? "The entry is disabled"
        : "The entry belongs to another client and has no brokerAllowed: true",
      "configuration",
      ["Set brokerAllowed: true on the entry (or enable it) if this broker may use it, then mcp.refresh()"],
    );
  }
  if (!registry.found) {
    return verdict("registry_absent", "No MCP registry was found", "configuration", [
      "Create .mcp.json in the project or start repl-mcp with --config FILE",
    ]);
  }
  return verdict("server_absent", "The registry has no server of that name", "configuration", [
    "Use mcp.servers() to see the configured names",
  ]);
}

/** allowedTools, and an OAuth grant that was never stored. */
function policyVerdict(entry: ServerEntry, tool: string | null): Verdict | undefined {
  if (tool !== null && !granted(entry, tool)) {
    return verdict("not_granted", "The tool is outside the entry's allowedTools", "configuration", [
      "Add the tool to allowedTools if this broker may call it, then mcp.refresh()",
    ]);
  }
  const transport = entry.transport;
  if (transport.type !== "http" || !transport.oauth) return undefined;
  const grant = transport.oauth.grantType ?? "authorization_code";
  const stored = transport.oauth.credentialFile && existsSync(transport.oauth.credentialFile);
  if (grant === "authorization_code" && !stored) {
    return verdict("credentials_missing", "No OAuth grant has been stored for this broker", "configuration", [
      "Run repl-mcp --config REGISTRY --oauth-login SERVER",
    ]);
  }
  return undefined;
}

/** Not connected: never tried, or the last attempt failed. */
function connectionVerdict(pool: ConnectionPool, entry: ServerEntry, server: string): Verdict | undefined {
  if (pool.isLive(entry)) return undefined;
  const failure = pool.lastFailure(entry);
  if (failure) {
    return verdict(
      failure.kind,
      `The last connection attempt failed ${Math.round((Date.now() - failure.at) / 1000)} s ago`,
      "last_connection_attempt",
      ["Verify the entry, then call mcp.refresh() to retry"],
    );
  }
  return verdict(
    "disconnected",
    "Not connected yet; the first call or list_tools connects",
    "transport_state",
    [`Call mcp.list_tools(${JSON.stringify(server)}) to connect and load the catalogue`],
  );
}

/** Connected: whether the cached catalogue is there, fresh, and has the tool. */
function catalogueVerdict(
  catalogues: Catalogues,
  entry: ServerEntry,
  server: string,
  tool: string | null,
): Verdict {
  if (tool === null) return verdict("ready", "Connected", "transport_state", [], true);
  const list = `mcp.list_tools(${JSON.stringify(server)})`;
  const cached = catalogues.cached(entry);
  if (!cached) {
    return verdict(
      "catalogue_not_loaded",
      "Connected, but the tool list has not been loaded",
      "cached_catalogue",
      [`Call ${list}`],
      true,
    );
  }
  if (cached.ageMs >= BROKER_CATALOGUE_TTL_MS) {
    return verdict(
      "catalogue_stale",
      `The cached tool list is ${Math.round(cached.ageMs / 1000)} s old (older than ${BROKER_CATALOGUE_TTL_MS / 1000} s)`,
      "cached_catalogue",
      [`Call ${list} to reload it`],
      true,
    );
  }
  if (cached.tools.some((candidate) => candidate.name === tool)) {
    return verdict("ready", "Connected and the tool is in the catalogue", "cached_catalogue", [], true);
  }
  return verdict(
    "tool_missing",
    "The peer's catalogue has no such tool",
    "cached_catalogue",
    [`Inspect ${list}`],
    true,
  );
}
