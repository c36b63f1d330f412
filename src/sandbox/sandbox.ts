// Contained cells (--sandbox; docs/sandbox.md). One Sandbox per server: it checks at start that this
// machine can contain (and refuses to serve otherwise), starts the runtime's proxy, and gives each session
// the way to start its workers inside the sandbox. Each worker gets a directory of its own: its TMPDIR and
// its proxy socket (front.ts), removed when the worker is gone, by its guardian if the server is gone.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, relative } from "node:path";
import { ReplError } from "../errors.ts";
import { ensurePrivateDirectory } from "../fs/private-dir.ts";
import type { SpawnSpec } from "../guardian/protocol.ts";
import { GuardedProcess } from "../guardian/spawn.ts";
import { SANDBOX_PROBE_TIMEOUT_MS, SANDBOX_SOCKET_PATH_MAX_BYTES } from "../limits.ts";
import { log } from "../log.ts";
import { withTimeout } from "../timeout.ts";
import type { Contained } from "../worker/process.ts";
import { applySeccompProgram, javaAgentJar, quote, socatProgram } from "./assets.ts";
import { PROXY_SOCKET_NAME, RUNTIME_PROTECTED_NAMES, type ServerSecrets, workerLists } from "./builtin.ts";
import { Decisions, type Destination, type Verdict } from "./decisions.ts";
import { ProxyFront } from "./front.ts";
import { PathRules } from "./paths.ts";
import { entryPath, type Policy } from "./policy.ts";
import type { ContainedRecord } from "./record.ts";
import {
  type FilesystemLists,
  type PathEntry,
  proxyEndpoint,
  releaseCommand,
  runtimeSupported,
  startRuntime,
  stopRuntime,
  wrapCommand,
} from "./runtime.ts";
import { ProtectionWatch } from "./watch.ts";

/** What health, session open and inspect show of a contained session's policy. */
export interface SandboxView {
  contained: true;
  policy: string;
  writable: string[];
  read_denies: number;
  allowed_hosts: string[];
  denied_hosts: number;
  asks_unknown_hosts: boolean;
}

/** What a contained session gets: its workers' start, and the rules for paths the server opens for it. */
export interface SessionContainment {
  contain(spec: SpawnSpec): Promise<Contained>;
  /** Serves an adopted contained worker's network again (a front at its socket); returns its release. */
  adopt(record: ContainedRecord): () => void;
  /** The rules as they stand now (the registry's secret files can change). */
  rules(): PathRules;
}

/** What a session gives the sandbox: where it lives, whom to ask, where refusals go. */
export interface SessionPlaces {
  project: string;
  /** The interpreter's environment, when it is the project's own .venv. */
  environment: string | undefined;
  /**
   * What the session's broker keeps secret now: credential values (a variable holding one is not
   * inherited by a contained worker) and files (its registry, OAuth credential files: not readable).
   */
  secretsNow(): { values: string[]; files: string[] };
  ask(destination: Destination): Promise<Verdict>;
  refused(destination: Destination, reason: string): void;
}

export class Sandbox {
  readonly decisions = new Decisions();
  /** Every worker directory whose worker this server has not seen end (a parked one stays in it). */
  private readonly unreleased = new Set<string>();
  /**
   * The runtime keeps a socket of its own (its proxy's HTTP backend) in the run directory, which a server
   * killed with SIGKILL cannot remove: a guardian of its own removes the directory then, as a worker's
   * guardian removes the worker's. Its child only waits for the server to go.
   */
  private keeper: GuardedProcess | undefined;

  private constructor(
    readonly policy: Policy,
    private readonly secrets: ServerSecrets,
    private readonly dirs: { workers: string; cache: string; run: string },
    /** What a worker's command starts with to give up every capability ("" where it holds none). */
    private readonly dropCapabilities: string,
  ) {}

  /**
   * Checks this machine, starts the runtime and proves it contains; refuses with one line saying why
   * and what to do. A server that cannot contain does not serve: never silently unsandboxed.
   */
  static async start(policy: Policy, secrets: ServerSecrets): Promise<Sandbox> {
    if (!runtimeSupported()) {
      throw unavailable(
        `containment needs Linux (bubblewrap) or macOS (Seatbelt); this is ${process.platform}`,
      );
    }
    const missing = ["bwrap", "socat", "rg"].filter(
      (name) => process.platform === "linux" && !Bun.which(name),
    );
    if (missing.length > 0) {
      throw unavailable(
        `${missing.join(", ")} not found; install bubblewrap, socat and ripgrep (Debian, Ubuntu: apt-get install bubblewrap socat ripgrep)`,
      );
    }
    const applySeccomp = applySeccompProgram();
    if (process.platform === "linux" && !applySeccomp) {
      throw unavailable(`no seccomp helper for ${process.arch}: Unix sockets could not be refused to cells`);
    }
    const setpriv = Bun.which("setpriv") ?? undefined;
    const dropCapabilities = capabilityDrop(setpriv);
    const dirs = sandboxDirectories();
    const sandbox = new Sandbox(policy, secrets, dirs, dropCapabilities);
    sandbox.keeper = keeper(dirs.run);
    if (process.platform === "linux" && !setpriv) {
      log.warn(
        "sandbox: setpriv (util-linux) not found: the proxy's bridge outlives a server killed with SIGKILL",
      );
    }
    const helpers = {
      applySeccomp: applySeccomp ?? "",
      socat: socatProgram(Bun.which("socat") ?? "socat", setpriv),
      javaAgentJar: javaAgentJar(),
      runDirectory: dirs.run,
    };
    const settings = {
      network: {
        allowedDomains: policy.allowedDomains,
        deniedDomains: policy.deniedDomains,
        strictAllowlist: policy.strictAllowlist,
      },
      filesystem: {},
    };
    let problems: string[];
    try {
      problems = await startRuntime(settings, helpers, (target) => sandbox.decisions.decide(target));
    } catch (error) {
      await sandbox.stop();
      throw unavailable(`the sandbox runtime did not start: ${(error as Error).message}`);
    }
    if (problems.length > 0) {
      await sandbox.stop();
      throw unavailable(problems.join("; "));
    }
    const probe = await sandbox.probe();
    if (probe) {
      await sandbox.stop();
      throw unavailable(probe);
    }
    return sandbox;
  }

  /**
   * Proves the sandbox holds here: a contained command must run, must not read a file the lists deny,
   * and must not write outside its writable places. Returns why not, or undefined. Used at start (a
   * server that cannot contain does not serve) and by `repl-mcp doctor`.
   */
  async probe(): Promise<string | undefined> {
    const own = mkdtempSync(join(this.dirs.workers, "probe-"));
    // The project is elsewhere, as a session's is: its placeholders must be made there.
    const project = mkdtempSync(join(this.dirs.cache, ".probe-"));
    const secret = join(own, "secret");
    const outside = join(own, "outside");
    for (const dir of [secret, outside, join(own, "tmp")]) mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(secret, "key"), "repl-mcp probe\n", { mode: 0o600 });
    try {
      const lists = workerLists(
        this.policy,
        this.places({ project, environment: undefined }, own, sandboxHome()),
        this.secrets,
      );
      lists.denyRead.push(secret);
      const wrapped = await wrapCommand({
        command: [
          `if cat ${quote(join(secret, "key"))} >/dev/null 2>&1; then exit 3; fi`,
          `if echo x 2>/dev/null >${quote(join(outside, "written"))}; then exit 4; fi`,
          "exit 0",
        ].join("; "),
        cwd: project,
        filesystem: lists,
        commandId: crypto.randomUUID(),
        proxySocket: undefined,
      });
      const exit = await runGuarded(wrapped, project);
      if (exit.code === 3) return "a contained command could read a file the policy denies";
      if (exit.code === 4 || existsSync(join(outside, "written")))
        return "a contained command could write outside its writable places";
      if (exit.code !== 0) return `a command in the sandbox failed: ${exit.why}`;
      return undefined;
    } finally {
      releaseCommand();
      rmSync(own, { recursive: true, force: true });
      rmSync(project, { recursive: true, force: true });
    }
  }

  private places(session: Pick<SessionPlaces, "project" | "environment">, own: string, home: string) {
    return {
      home,
      project: session.project,
      tmp: join(own, "tmp"),
      cache: this.dirs.cache,
      environment: session.environment,
      workers: this.dirs.workers,
      own,
    };
  }

  /** How a session's workers start contained, and the sandbox's rules for the paths the server opens for it. */
  forSession(session: SessionPlaces): SessionContainment {
    const live = new Set<string>();
    const lists = (own: string) => {
      const now = session.secretsNow();
      const secrets = { ...this.secrets, readDenied: [...this.secrets.readDenied, ...now.files] };
      return { lists: workerLists(this.policy, this.places(session, own, sandboxHome()), secrets), now };
    };
    return {
      contain: (spec) => this.contain(spec, session, live, lists),
      adopt: (record) => {
        // The worker is the earlier server's wrap: its placeholders are not this runtime's to count.
        const proxy = proxyEndpoint();
        if (proxy === undefined) return () => {};
        rmSync(record.socket, { force: true });
        const front = new ProxyFront(record.socket, proxy, session, this.decisions);
        live.add(record.own);
        this.unreleased.add(record.own);
        return () => {
          live.delete(record.own);
          this.unreleased.delete(record.own);
          front.close();
        };
      },
      rules: () => {
        const [first = join(this.dirs.workers, "none"), ...others] = live;
        const { lists: rules } = lists(first);
        for (const own of others) {
          rules.allowRead.push(join(own, PROXY_SOCKET_NAME));
          rules.allowWrite.push(join(own, "tmp"));
        }
        return new PathRules(rules);
      },
    };
  }

  private async contain(
    spec: SpawnSpec,
    session: SessionPlaces,
    live: Set<string>,
    listsFor: (own: string) => { lists: FilesystemLists; now: { values: string[] } },
  ): Promise<Contained> {
    const own = mkdtempSync(join(this.dirs.workers, "w-"));
    const tmp = join(own, "tmp");
    mkdirSync(tmp, { mode: 0o700 });
    const socket = join(own, PROXY_SOCKET_NAME);
    const proxy = proxyEndpoint();
    const front = proxy === undefined ? undefined : new ProxyFront(socket, proxy, session, this.decisions);
    live.add(own);
    this.unreleased.add(own);
    const release = () => {
      live.delete(own);
      this.unreleased.delete(own);
      front?.close();
      rmSync(own, { recursive: true, force: true });
    };
    const { lists, now } = listsFor(own);
    let wrapped: string;
    try {
      const command = `TMPDIR=${quote(tmp)} exec ${this.dropCapabilities}${[spec.program, ...spec.args].map(quote).join(" ")}`;
      wrapped = await wrapCommand({
        command,
        cwd: session.project,
        filesystem: lists,
        commandId: `${own.slice(own.lastIndexOf("/") + 3)}${crypto.randomUUID()}`,
        proxySocket: front ? socket : undefined,
      });
    } catch (error) {
      release();
      throw new ReplError(
        "WORKER_START_FAILED",
        `The sandbox could not contain the worker: ${(error as Error).message}`,
      );
    }
    const withheld = new Set(now.values.filter((value) => value.length > 0));
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(spec.env)) if (!withheld.has(value)) env[name] = value;
    Object.assign(env, {
      TMPDIR: tmp,
      XDG_CACHE_HOME: this.dirs.cache,
      MPLCONFIGDIR: join(this.dirs.cache, "matplotlib"),
      // What worker.py needs to name a refusal in a result (docs/worker-protocol.md).
      REPL_MCP_SANDBOX: JSON.stringify(lists),
    });
    const record: ContainedRecord = { contained: true, own, socket, policy: this.policy.source };
    let watch: ProtectionWatch | undefined;
    return {
      spec: { program: "/bin/sh", args: ["-c", wrapped], env, cwd: spec.cwd, cleanup: [own] },
      record,
      release: () => {
        watch?.close();
        releaseCommand();
        release();
      },
      onBreach: (stop) => {
        watch = new ProtectionWatch(protectedPaths(lists, session.project), (path) =>
          stop(
            `The sandbox stopped this worker: ${path}, which it protects, was replaced by a program on this ` +
              "host, and the worker would have reached the new file unprotected; variables cleared. The next " +
              "cell starts a worker that protects it again",
          ),
        );
      },
    };
  }

  /** The policy as the tools show it. */
  view(session: Pick<SessionPlaces, "project" | "environment">): SandboxView {
    const writable = [session.project, "its own TMPDIR", this.dirs.cache];
    if (session.environment) writable.push(session.environment);
    writable.push(...this.policy.allowWrite.map(entryPath));
    return {
      contained: true,
      policy: this.policy.source,
      writable,
      read_denies: this.secrets.readDenied.length + this.policy.denyRead.length + 11,
      allowed_hosts: this.policy.allowedDomains,
      denied_hosts: this.policy.deniedDomains.length,
      asks_unknown_hosts: !this.policy.strictAllowlist,
    };
  }

  async stop(): Promise<void> {
    await stopRuntime(this.unreleased.size > 0).catch((error) => log.debug("sandbox runtime stop:", error));
    await this.keeper?.stop(0);
    rmSync(this.dirs.run, { recursive: true, force: true });
  }
}

/** The files and directories a worker's sandbox mounts over, as they exist when it starts. */
function protectedPaths(lists: FilesystemLists, project: string): string[] {
  const names = (entries: PathEntry[]) =>
    entries.flatMap((entry) => {
      const path = typeof entry === "string" ? entry : entry.path;
      return typeof entry === "string" && /[*?[\]]/.test(path) ? [] : [path];
    });
  return [
    ...names(lists.denyRead),
    ...names(lists.denyWrite),
    ...RUNTIME_PROTECTED_NAMES.map((name) => join(project, name)),
  ];
}

/** Runs a wrapped command through a guardian (no process of ours is left unowned); its exit and why. */
async function runGuarded(wrapped: string, cwd: string): Promise<{ code: number | null; why: string }> {
  const guarded = new GuardedProcess(
    { program: "/bin/sh", args: ["-c", wrapped], env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, cwd },
    { stderr: "pipe" },
  );
  guarded.stdin.end();
  const stderr = guarded.stderr ? new Response(guarded.stderr).text() : Promise.resolve("");
  void new Response(guarded.stdout).arrayBuffer();
  const exit = await withTimeout(guarded.exited, SANDBOX_PROBE_TIMEOUT_MS, () => "late" as const);
  if (exit === "late") {
    await guarded.stop(0);
    return { code: null, why: "it did not finish in time" };
  }
  const why = (await stderr).trim().split("\n").pop() || `exit status ${exit?.code ?? exit?.signal}`;
  return { code: exit?.code ?? null, why };
}

/**
 * What a worker's command starts with to give up every capability. As root, a cell holds all of them in
 * the user namespace the seccomp helper maps uid 0 into: enough to make network and other namespaces of
 * its own, and with them reach kernel code that only such namespaces expose. The worker gives them up for
 * good (an empty bounding set) before Python starts; without setpriv it could not, so a root server does
 * not contain at all. Elsewhere nothing is held: "".
 */
function capabilityDrop(setpriv: string | undefined): string {
  if (process.platform !== "linux" || process.geteuid?.() !== 0) return "";
  if (!setpriv) {
    throw unavailable(
      "as root, setpriv (util-linux) is needed to take every capability from the cells; install util-linux, or run as a user",
    );
  }
  return `${quote(setpriv)} --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- `;
}

/** The guardian that removes the runtime's directory `run` when the server is gone (see Sandbox.keeper). */
function keeper(run: string): GuardedProcess {
  const guarded = new GuardedProcess(
    {
      program: "/bin/sh",
      args: ["-c", "exec cat >/dev/null"],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      cwd: run,
      cleanup: [run],
    },
    { stderr: "ignore" },
  );
  void new Response(guarded.stdout).arrayBuffer();
  return guarded;
}

function unavailable(why: string): ReplError {
  return new ReplError("SANDBOX_UNAVAILABLE", `--sandbox cannot contain cells here: ${why}`);
}

function sandboxHome(): string {
  return process.env.HOME || homedir();
}

/**
 * The sandbox's directories: every worker's own directory (with its TMPDIR and proxy socket) under one
 * private directory in the temporary directory (a socket's path must stay short); the cache contained
 * workers share beside repl-mcp's own cache (which they may not write); a directory for the runtime.
 */
function sandboxDirectories(): { workers: string; cache: string; run: string } {
  let base = join(tmpdir(), `repl-mcp-sandbox-${process.getuid?.() ?? "user"}`);
  if (Buffer.byteLength(base) > SANDBOX_SOCKET_PATH_MAX_BYTES)
    base = `/tmp/repl-mcp-sandbox-${process.getuid?.() ?? "user"}`;
  ensurePrivateDirectory(base, "The sandbox directory");
  const workers = realpathSync(base);
  const xdg = process.env.XDG_CACHE_HOME;
  const cacheHome = xdg?.startsWith("/") ? xdg : join(sandboxHome(), ".cache");
  const cache = join(cacheHome, "repl-mcp-contained");
  ensurePrivateDirectory(cache, "The contained workers' cache directory");
  sweepRunDirectories(workers);
  const run = mkdtempSync(join(workers, `r-${process.pid}-`));
  return { workers, cache: realpathSync(cache), run };
}

/**
 * The runtime's directories of servers that are gone (a server killed with SIGKILL leaves its own, empty:
 * the bridge removed its socket when it was told to stop); a worker's directory is its guardian's to remove.
 */
function sweepRunDirectories(workers: string): void {
  for (const name of readdirSync(workers)) {
    const pid = Number(/^r-(\d+)-/.exec(name)?.[1]);
    if (!pid || pid === process.pid || alive(pid)) continue;
    rmSync(join(workers, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether `path` lies in `dir` (or is it). */
export function within(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === "" || (!rel.startsWith("..") && !rel.startsWith("/"));
}
