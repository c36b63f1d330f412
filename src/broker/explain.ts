// mcp.explain: why a server or tool is (not) usable, from what the broker already knows. It never
// connects, never touches the network and never prints a configuration value.
import { existsSync } from "node:fs";
import { BROKER_ARGUMENT_MAX_BYTES, BROKER_CATALOGUE_TTL_MS, BROKER_RESULT_MAX_BYTES } from "../limits.ts";
import type { Catalogues } from "./catalogue.ts";
import { granted } from "./catalogue.ts";
import type { ConnectionPool } from "./connections.ts";
import type { Registry } from "./registry.ts";

export function explain(
  registry: Registry,
  pool: ConnectionPool,
  catalogues: Catalogues,
  server: string,
  tool: string | null,
) {
  const base = {
    server,
    tool,
    connected: false,
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
  };
  const answer = (
    status: string,
    reason: string,
    evidence: Record<string, unknown>,
    actions: string[],
    connected = false,
  ) => ({
    ...base,
    status,
    reason,
    connected,
    evidence,
    actions,
  });

  if (registry.error) {
    return answer(
      registry.errorCode === "CREDENTIALS_MISSING" ? "credentials_missing" : "config_invalid",
      registry.error,
      { configuration: "invalid" },
      ["Repair the MCP registry, then call mcp.refresh()"],
    );
  }
  if (registry.disabled) {
    return answer(
      "broker_disabled",
      "The broker is disabled (--mcp-scope none or REPL_MCP_NO_BRIDGE=1)",
      {},
      ["Start repl-mcp with --mcp-scope project (the default) and without REPL_MCP_NO_BRIDGE=1"],
    );
  }
  const entry = registry.servers.get(server);
  if (!entry) {
    const excluded = registry.excluded.get(server);
    if (excluded === "disabled" || excluded === "not_granted") {
      return answer(
        "not_granted",
        excluded === "disabled"
          ? "The entry is disabled"
          : "The entry belongs to another client and has no brokerAllowed: true",
        { exclusion: excluded },
        ["Set brokerAllowed: true on the entry (or enable it) if this broker may use it, then mcp.refresh()"],
      );
    }
    if (!registry.found) {
      return answer("registry_absent", "No MCP registry was found", {}, [
        "Create .mcp.json in the project or start repl-mcp with --config FILE",
      ]);
    }
    return answer(
      "server_absent",
      "The registry has no server of that name",
      { configured: [...registry.servers.keys()] },
      ["Use mcp.servers() to see the configured names"],
    );
  }
  if (tool !== null && !granted(entry, tool)) {
    return answer(
      "not_granted",
      "The tool is outside the entry's allowedTools",
      { allowed_tools: entry.allowedTools },
      ["Add the tool to allowedTools if this broker may call it, then mcp.refresh()"],
    );
  }
  const transport = entry.transport;
  if (transport.type === "http" && transport.oauth) {
    const grant = transport.oauth.grantType ?? "authorization_code";
    if (
      grant === "authorization_code" &&
      !(transport.oauth.credentialFile && existsSync(transport.oauth.credentialFile))
    ) {
      return answer("credentials_missing", "No OAuth grant has been stored for this broker", {}, [
        "Run repl-mcp --config REGISTRY --oauth-login SERVER",
      ]);
    }
  }
  if (!pool.isLive(entry)) {
    const failure = pool.lastFailure(entry);
    if (failure) {
      return answer(
        failure.kind,
        "The last connection attempt failed",
        { last_connection_attempt: { at_ms: failure.at, kind: failure.kind } },
        ["Verify the entry, then call mcp.refresh() to retry"],
      );
    }
    return answer(
      "disconnected",
      "Not connected yet; the first call or list_tools connects",
      { transport_state: "not_connected" },
      [`Call mcp.list_tools(${JSON.stringify(server)}) to connect and load the catalogue`],
    );
  }
  if (tool === null) return answer("ready", "Connected", { transport_state: "connected" }, [], true);
  const cached = catalogues.cached(entry);
  if (!cached) {
    return answer(
      "catalogue_not_loaded",
      "Connected, but the tool list has not been loaded",
      {},
      [`Call mcp.list_tools(${JSON.stringify(server)})`],
      true,
    );
  }
  if (cached.ageMs >= BROKER_CATALOGUE_TTL_MS) {
    return answer(
      "catalogue_stale",
      "The cached tool list is older than 15 s",
      { cached_catalogue_age_ms: cached.ageMs },
      [`Call mcp.list_tools(${JSON.stringify(server)}) to reload it`],
      true,
    );
  }
  if (cached.tools.some((candidate) => candidate.name === tool)) {
    return answer(
      "ready",
      "Connected and the tool is in the catalogue",
      { cached_catalogue: "present" },
      [],
      true,
    );
  }
  return answer(
    "tool_missing",
    "The peer's catalogue has no such tool",
    { cached_catalogue: "absent" },
    [`Inspect mcp.list_tools(${JSON.stringify(server)})`],
    true,
  );
}
