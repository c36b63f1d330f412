// Where the broker's servers come from (docs/broker.md "The registry"): the launch project's .mcp.json or an explicit
// --config file, plus opted-in entries of ~/.claude.json. A broken registry never stops the server: it
// becomes a configuration error that broker operations report until a refresh finds it repaired.
import { closeSync, constants, fstatSync, openSync, readSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import * as v from "valibot";
import { codeOf, describe, type ErrorCodeName, ReplError } from "../errors.ts";
import { REGISTRY_FILE_MAX_BYTES } from "../limits.ts";
import { sizeText } from "../text/size.ts";
import { configError, isSelf, parseEntry, resolveEntry, type ServerEntry } from "./config.ts";

export type Scope = "project" | "user" | "local";
export type ExclusionReason = "disabled" | "not_granted" | "self";

export const SCOPE_ERROR =
  "MCP scopes must be project, user, local, all or none; export plugin servers into an explicit config file";

/** Parses --mcp-scope; `none` disables the broker. */
export function parseScopes(text: string): Set<Scope> {
  const parts = text.split(",").map((part) => part.trim());
  if (parts.length === 1 && parts[0] === "none") return new Set();
  if (parts.length === 1 && parts[0] === "all") return new Set(["project", "user", "local"]);
  const scopes = new Set<Scope>();
  for (const part of parts) {
    if (part !== "project" && part !== "user" && part !== "local")
      throw new ReplError("CONFIG_INVALID", SCOPE_ERROR);
    scopes.add(part);
  }
  return scopes;
}

export interface RegistryOptions {
  /** Canonical project directory. */
  project: string;
  /** An explicit registry file (absolute), shared by every session. */
  configPath: string | undefined;
  scopes: Set<Scope>;
  env: NodeJS.ProcessEnv;
}

export interface Registry {
  servers: Map<string, ServerEntry>;
  excluded: Map<string, ExclusionReason>;
  error: string | null;
  /** CONFIG_INVALID or CREDENTIALS_MISSING when `error` is set. */
  errorCode: ErrorCodeName | null;
  /** Whether any registry file exists at all (for explain's registry_absent). */
  found: boolean;
  disabled: boolean;
  provenance: { project: string; scope: string; registry: "explicit_config" | "project_and_opt_in_scopes" };
}

const DocumentWithServers = v.object({ mcpServers: v.record(v.string(), v.unknown()) });
const Servers = v.optional(v.record(v.string(), v.unknown()));
/** Only the parts of another client's file the broker reads; everything else in it is ignored. */
const ClaudeJson = v.object({
  mcpServers: Servers,
  projects: v.optional(v.record(v.string(), v.object({ mcpServers: Servers }))),
});

const TOO_LARGE = `MCP registry exceeds ${sizeText(REGISTRY_FILE_MAX_BYTES)}`;

/** Reads a registry file: a regular file within its size limit, opened without blocking on FIFOs. */
function readRegistryFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw configError("Cannot read MCP registry file; check --config and file permissions");
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile())
      throw configError("MCP registry must be a regular file; FIFOs and devices are unsupported");
    if (stat.size > REGISTRY_FILE_MAX_BYTES) throw configError(TOO_LARGE);
    // The sandbox runtime keeps an absent .mcp.json absent for a contained worker by mounting an empty,
    // read-only file at its name while the worker runs (docs/sandbox.md): that is no registry at all.
    if (stat.size === 0 && (stat.mode & 0o222) === 0) return undefined;
    const buffer = Buffer.alloc(stat.size + 1);
    const read = readSync(fd, buffer, 0, buffer.length, 0);
    if (read > REGISTRY_FILE_MAX_BYTES) throw configError(TOO_LARGE);
    return buffer.subarray(0, read).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw configError("MCP registry is invalid JSON; values are omitted from diagnostics");
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function loadRegistry(options: RegistryOptions): Registry {
  const explicit = options.configPath !== undefined;
  const registry: Registry = {
    servers: new Map(),
    excluded: new Map(),
    error: null,
    errorCode: null,
    found: false,
    disabled: options.scopes.size === 0 || options.env.REPL_MCP_NO_BRIDGE === "1",
    provenance: {
      project: options.project,
      scope: options.scopes.size === 0 ? "none" : [...options.scopes].join(","),
      registry: explicit ? "explicit_config" : "project_and_opt_in_scopes",
    },
  };
  if (registry.disabled) return registry;
  try {
    // Later sources override earlier ones by name: user, then local, then the project (or --config).
    if (options.scopes.has("user") || options.scopes.has("local")) readClaudeJson(registry, options);
    if (options.scopes.has("project")) readProjectRegistry(registry, options);
  } catch (error) {
    registry.servers.clear();
    registry.error =
      error instanceof ReplError ? error.message : `MCP registry could not be loaded: ${describe(error)}`;
    registry.errorCode = error instanceof ReplError ? codeOf(error) : "CONFIG_INVALID";
  }
  return registry;
}

/** The user and local scopes of ~/.claude.json: another client's file, so only granted entries count. */
function readClaudeJson(registry: Registry, options: RegistryOptions): void {
  const home = options.env.HOME;
  if (!home) throw configError("HOME must be set to read user or local MCP scopes");
  const text = readRegistryFile(join(home, ".claude.json"));
  if (text === undefined) return;
  registry.found = true;
  const document = v.safeParse(ClaudeJson, parseJson(text));
  if (!document.success) throw configError("~/.claude.json has an unexpected shape; values are omitted");
  if (options.scopes.has("user")) {
    for (const [name, raw] of Object.entries(document.output.mcpServers ?? {})) {
      addEntry(registry, options, { name, raw, scope: "user", base: options.project, foreign: true });
    }
  }
  if (options.scopes.has("local")) {
    const local = document.output.projects?.[options.project]?.mcpServers ?? {};
    for (const [name, raw] of Object.entries(local)) {
      addEntry(registry, options, { name, raw, scope: "local", base: options.project, foreign: true });
    }
  }
}

/** The project's .mcp.json, or the explicit --config file (which must exist). */
function readProjectRegistry(registry: Registry, options: RegistryOptions): void {
  const explicit = options.configPath !== undefined;
  const path = options.configPath ?? join(options.project, ".mcp.json");
  const text = readRegistryFile(path);
  if (text === undefined && explicit) {
    throw configError("Cannot read MCP registry file; check --config and file permissions");
  }
  if (text === undefined) return;
  registry.found = true;
  const document = v.safeParse(DocumentWithServers, parseJson(text));
  if (!document.success) {
    throw configError("Project MCP registry requires mcpServers; check the registry format");
  }
  const scope = explicit ? "config" : "project";
  for (const [name, raw] of Object.entries(document.output.mcpServers)) {
    addEntry(registry, options, { name, raw, scope, base: dirname(path), foreign: false });
  }
}

interface Written {
  name: string;
  raw: unknown;
  scope: ServerEntry["scope"];
  /** The directory relative paths in the entry resolve against. */
  base: string;
  /** From another client's file: usable only with brokerAllowed: true. */
  foreign: boolean;
}

/** Adds (or excludes) one entry; each entry is parsed once. */
function addEntry(
  registry: Registry,
  options: RegistryOptions,
  { name, raw, scope, base, foreign }: Written,
) {
  const flags = raw && typeof raw === "object" ? (raw as Record<string, unknown>) : {};
  const exclude = (reason: ExclusionReason) => {
    registry.servers.delete(name);
    registry.excluded.set(name, reason);
  };
  if (flags.disabled === true) return exclude("disabled");
  // Another client's entries are not ours to use unless the entry itself grants it.
  if (foreign && flags.brokerAllowed !== true) return exclude("not_granted");
  const entry = parseEntry(name, raw);
  if (isSelf(entry)) {
    registry.excluded.set(name, "self");
    return;
  }
  registry.servers.set(name, resolveEntry(name, entry, scope, base, options.env, resolve, isDirectory));
  registry.excluded.delete(name);
}
