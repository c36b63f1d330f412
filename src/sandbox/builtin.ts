// The built-in policy (docs/sandbox.md explains each choice): a contained worker may write its project,
// a temporary directory of its own, its environment and a cache of its own, and nothing else; it may read
// everything except where credentials live and what repl-mcp keeps secret; some files are never
// writable whatever the policy says. The person's policy file adds to these lists (policy.ts).
import { join } from "node:path";
import type { Policy } from "./policy.ts";
import type { FilesystemLists } from "./runtime.ts";

/** Where credentials live in a home directory: never readable by a contained cell unless re-allowed. */
export const CREDENTIAL_PLACES = [
  ".ssh",
  ".aws",
  ".azure",
  ".config/gcloud",
  ".kube",
  ".docker",
  ".gnupg",
  ".netrc",
  ".npmrc",
  ".pypirc",
  ".git-credentials",
] as const;

/** Start-up files of the shells: whoever writes one runs code as the person at their next login. */
export const SHELL_START_FILES = [
  ".bashrc",
  ".bash_profile",
  ".bash_login",
  ".profile",
  ".zshrc",
  ".zshenv",
  ".zprofile",
  ".zlogin",
  ".config/fish/config.fish",
] as const;

/**
 * A project's files that make other programs run something: the MCP registry (a stdio entry is a
 * command the broker runs outside the sandbox) and Claude Code's settings (hooks). The runtime itself
 * protects .git/hooks, .git/config, .vscode, .idea and the shells' files in the project.
 */
export const PROJECT_RUN_FILES = [
  ".mcp.json",
  ".claude/settings.json",
  ".claude/settings.local.json",
] as const;

/**
 * What the runtime makes writable for its own use unless told otherwise (a shared /tmp/claude, npm's and
 * Claude Code's log directories): writable by every sandbox of every program, so never by ours.
 */
export const RUNTIME_DEFAULT_WRITES = [
  "/tmp/claude",
  "/private/tmp/claude",
  ".npm/_logs",
  ".claude/debug",
] as const;

/**
 * The names the runtime itself protects in the project it wraps in (its "dangerous" files and
 * directories), as it documents them; only watched here (watch.ts), never given to it.
 */
export const RUNTIME_PROTECTED_NAMES = [
  ".gitconfig",
  ".gitmodules",
  ".bashrc",
  ".bash_profile",
  ".zshrc",
  ".zprofile",
  ".profile",
  ".ripgreprc",
  ".mcp.json",
  ".vscode",
  ".idea",
  ".claude/commands",
  ".claude/agents",
  ".git/hooks",
  ".git/config",
] as const;

/** What is secret or ours to keep, server-wide (sandbox.ts gathers it from the server's configuration). */
export interface ServerSecrets {
  /** Files and directories a cell must not read: tokens, credentials, the journal, parked sessions. */
  readDenied: string[];
  /** Files and directories a cell must not write: the registry, repl-mcp's configuration, cache and state. */
  writeDenied: string[];
}

/** One worker's places (sandbox.ts makes them). */
export interface WorkerPlaces {
  home: string;
  project: string;
  /** Its private temporary directory (TMPDIR). */
  tmp: string;
  /** The cache every contained worker shares (XDG_CACHE_HOME): pip's and matplotlib's among others. */
  cache: string;
  /** The interpreter's environment when it is the project's own .venv outside the project. */
  environment: string | undefined;
  /** Where every worker's own directory lives: none may read another's. */
  workers: string;
  /** This worker's own directory there (its tmp and its proxy socket). */
  own: string;
}

/** A worker's proxy socket, in its own directory (front.ts listens there, its sandbox's relays dial it). */
export const PROXY_SOCKET_NAME = "p.sock";

export function workerLists(policy: Policy, places: WorkerPlaces, secrets: ServerSecrets): FilesystemLists {
  const inHome = (path: string) => join(places.home, path);
  return {
    denyRead: [...CREDENTIAL_PLACES.map(inHome), ...secrets.readDenied, places.workers, ...policy.denyRead],
    // The socket alone: an allowRead entry is bound back read-only after the writable places, so one
    // naming the worker's own directory would make its TMPDIR in there read-only again.
    allowRead: [join(places.own, PROXY_SOCKET_NAME), ...policy.allowRead],
    allowWrite: [
      places.project,
      places.tmp,
      places.cache,
      ...(places.environment ? [places.environment] : []),
      ...policy.allowWrite,
    ],
    denyWrite: [
      ...PROJECT_RUN_FILES.map((path) => join(places.project, path)),
      ...SHELL_START_FILES.map(inHome),
      ...RUNTIME_DEFAULT_WRITES.map((path) => (path.startsWith("/") ? path : inHome(path))),
      ...secrets.writeDenied,
      ...policy.denyWrite,
    ],
  };
}
