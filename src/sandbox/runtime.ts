// The one importer of @anthropic-ai/sandbox-runtime (the runtime Claude Code sandboxes its shell with:
// bubblewrap, seccomp and a filtering proxy on Linux, Seatbelt on macOS). The runtime is one object per
// process, configured once; each worker start asks it to wrap the interpreter's command with the
// session's own filesystem lists. What the runtime cannot do for several sessions at once is done around
// it, here and in front.ts (docs/architecture.md, "Contained workers").
import { SandboxManager, SandboxRuntimeConfigSchema } from "@anthropic-ai/sandbox-runtime";
/** A path, or one marked to be read as nothing but a name (`{ path, literal: true }`), as the runtime takes it. */
export type PathEntry = string | { path: string; literal: true };

/** How a host nobody allowed or denied is decided: allowed, or refused with a reason the cell sees. */
export type AskAnswer = true | { allow: false; reason: string };
export type Ask = (target: { host: string; port?: number }) => Promise<AskAnswer>;

export interface FilesystemLists {
  denyRead: PathEntry[];
  allowRead: PathEntry[];
  allowWrite: PathEntry[];
  denyWrite: PathEntry[];
}

export interface RuntimeSettings {
  network: { allowedDomains?: string[]; deniedDomains?: string[]; strictAllowlist?: boolean };
  filesystem: Partial<FilesystemLists>;
}

/** The runtime's own verdict on settings, as "field: message", or undefined when it takes them. */
export function checkRuntimeSettings(settings: RuntimeSettings): string | undefined {
  const { network, filesystem } = settings;
  const parsed = SandboxRuntimeConfigSchema.safeParse({
    network: { allowedDomains: [], deniedDomains: [], ...network },
    filesystem: { denyRead: [], allowWrite: [], denyWrite: [], ...filesystem },
  });
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0];
  return issue ? `"${issue.path.join(".")}": ${issue.message}` : "refused by the sandbox runtime";
}

/** The helper programs the runtime runs, at paths outside the binary (sandbox/assets.ts). */
export interface RuntimeHelpers {
  applySeccomp: string;
  socat: string;
  javaAgentJar: string;
  /** A private directory for the runtime's own files (its proxy bridge's socket). */
  runDirectory: string;
}

/**
 * Starts the runtime's proxy (and on Linux its bridge) with the server-wide network lists. The
 * filesystem lists here are placeholders: every wrap gives its session's own. Resolves with the
 * runtime's complaints about this machine (missing programs, a root without the capability bubblewrap
 * needs), empty when it can contain.
 */
export async function startRuntime(
  settings: RuntimeSettings,
  helpers: RuntimeHelpers,
  ask: Ask,
): Promise<string[]> {
  const config = {
    network: {
      allowedDomains: settings.network.allowedDomains ?? [],
      deniedDomains: settings.network.deniedDomains ?? [],
      ...(settings.network.strictAllowlist ? { strictAllowlist: true } : {}),
    },
    filesystem: { denyRead: [], allowRead: [], allowWrite: [], denyWrite: [] },
    seccomp: { applyPath: helpers.applySeccomp },
    socatPath: helpers.socat,
    javaAgentJarPath: helpers.javaAgentJar,
  };
  // The bridge's socket goes into os.tmpdir(), read while the runtime starts: ours, for that moment.
  const tmpdir = process.env.TMPDIR;
  process.env.TMPDIR = helpers.runDirectory;
  try {
    await withoutExitHandlers(() => SandboxManager.initialize(config, ask));
  } finally {
    if (tmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = tmpdir;
  }
  return SandboxManager.checkDependencies().errors;
}

export function runtimeSupported(): boolean {
  return SandboxManager.isSupportedPlatform();
}

/**
 * Stops the proxy and bridge and removes the placeholders the runtime made for its wraps, unless a
 * contained worker outlives this server (parked, docs/sessions.md): the placeholders protect names in its
 * project for as long as it runs, so they stay, and the proxy and bridge end with the process.
 */
export async function stopRuntime(keepPlaceholders: boolean): Promise<void> {
  if (keepPlaceholders) return;
  await SandboxManager.reset();
}

/**
 * The runtime removes its placeholders in a process 'exit' handler of its own. A parked contained worker
 * would lose the protection of those names (a placeholder removed under a live sandbox unmounts its deny),
 * so the handler is taken off and stopRuntime decides.
 */
async function withoutExitHandlers<T>(work: () => Promise<T>): Promise<T> {
  const before = new Set(process.listeners("exit"));
  try {
    return await work();
  } finally {
    for (const listener of process.listeners("exit")) {
      if (!before.has(listener)) process.removeListener("exit", listener);
    }
  }
}

export interface WrapRequest {
  /** The shell command to contain. */
  command: string;
  /** The session's project: the runtime protects the dangerous files of its working directory. */
  cwd: string;
  filesystem: FilesystemLists;
  /** The runtime's attribution key for this worker's proxy connections. */
  commandId: string;
  /** Where this worker's proxy connections go instead of the runtime's shared bridge (front.ts). */
  proxySocket: string | undefined;
}

let wrapping: Promise<unknown> = Promise.resolve();

/**
 * The command that runs `command` inside the sandbox, as a shell string. Wraps run one at a time, each
 * in its session's project as the working directory: the runtime derives the project's own protected
 * files (.mcp.json, .git/hooks, ...) from process.cwd(), and would otherwise protect the server's
 * launch directory for every session. No code of ours reads process.cwd() after start-up.
 */
export function wrapCommand(request: WrapRequest): Promise<string> {
  const run = wrapping.then(async () => {
    const home = process.cwd();
    process.chdir(request.cwd);
    try {
      const wrapped = await withoutExitHandlers(() =>
        SandboxManager.wrapWithSandbox(
          request.command,
          undefined,
          { filesystem: request.filesystem },
          undefined,
          { commandId: request.commandId },
        ),
      );
      return request.proxySocket === undefined ? wrapped : redirectBridge(wrapped, request.proxySocket);
    } finally {
      process.chdir(home);
    }
  });
  wrapping = run.catch(() => undefined);
  return run;
}

/**
 * On Linux the wrapped command reaches the proxy through the runtime's one bridge socket, shared by every
 * sandbox of the process. Each worker gets a socket of its own instead (front.ts), so that a connection
 * names its session by where it arrives. The bridge's path is random and appears where the sandbox binds
 * and dials it; a command without it is refused, never run with the network of another.
 */
function redirectBridge(wrapped: string, socket: string): string {
  const bridge = SandboxManager.getLinuxHttpSocketPath();
  if (bridge === undefined) return wrapped;
  if (!/^[\w./-]+$/.test(socket)) throw new Error(`proxy socket path needs quoting: ${socket}`);
  const parts = wrapped.split(bridge);
  if (parts.length < 3) throw new Error("the sandbox runtime's command no longer names its proxy bridge");
  return parts.join(socket);
}

/** Gives back what one wrap holds (the runtime removes its placeholders once no wrap holds them). */
export function releaseCommand(): void {
  SandboxManager.cleanupAfterCommand();
}

/** The proxy on this host's loopback, where the fronts send their connections, and its clients' token. */
export function proxyEndpoint(): { port: number; token: string } | undefined {
  const port = SandboxManager.getProxyPort();
  const token = SandboxManager.getProxyAuthToken();
  return port === undefined || token === undefined ? undefined : { port, token };
}
