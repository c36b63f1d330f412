// Runs the MCP server until the client goes away (stdio) or a signal arrives, then stops every worker.
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import type { Journal } from "./broker/journal.ts";
import { openDurableJournal } from "./broker/journal-file.ts";
import { BUILTIN_SANDBOX, type ServeOptions } from "./cli/command.ts";
import type { HttpOptions } from "./cli/http.ts";
import { describe } from "./errors.ts";
import { withholdFromChildren } from "./guardian/env.ts";
import { serving, servingAfterOpening } from "./jit.ts";
import { type KernelServer, loadKernelServers } from "./kernels/config.ts";
import { SHUTDOWN_LIMIT_MS } from "./limits.ts";
import { keepConsoleOffStdout, log, setLogLevel } from "./log.ts";
import { adoptionRefusal } from "./sandbox/record.ts";
import { clientContext } from "./server/server.ts";
import { serveStdio } from "./server/stdio.ts";
import type { ClientSettings } from "./server/tools/tool.ts";
import { selectDefaultInterpreter } from "./sessions/interpreter.ts";
import { Sessions } from "./sessions/registry.ts";
import { SessionScope } from "./sessions/scope.ts";

export async function serve(options: ServeOptions): Promise<void> {
  if (options.oauthLogin !== undefined) {
    const { login } = await import("./login.ts");
    await login(options, options.oauthLogin);
  }
  setLogLevel(options.logLevel);
  keepConsoleOffStdout();
  const project = launchDirectory();
  const journal = journalOf(options.journal, project);
  const kernels = kernelServersOf(options.kernels, project);
  const kernelServers = kernels.servers;
  const sandbox = await startSandbox(options, project, kernels.secretFiles);
  const interpreter = selectDefaultInterpreter(options.python, project);
  if (interpreter.problem) log.warn(interpreter.problem);
  const sessions = new Sessions({
    kernelServers,
    project,
    interpreter,
    maxMemoryMib: options.maxMemoryMib,
    approvalTimeoutMs: options.approvalTimeoutSeconds * 1000,
    configPath: options.config === undefined ? undefined : resolve(project, options.config),
    scopes: options.scopes,
    journal,
    sandbox,
    keep: {
      defaultSeconds: options.keepSessionsSeconds,
      maxSeconds: options.keepMaxSeconds,
      hooks: { refuseAdoption: (containment) => adoptionRefusal(containment, sandbox !== undefined) },
    },
  });
  const settings = {
    maxMemoryMib: options.maxMemoryMib,
    resultStyle: options.resultStyle,
    approvalTimeoutMs: options.approvalTimeoutSeconds * 1000,
    contained: sandbox !== undefined,
  };
  collectOrphanKernels(sessions);
  const registryError = sessions.defaultBroker.health().configuration_error;
  if (registryError) log.warn(`MCP broker registry: ${registryError}`);

  const closeViewer = options.viewer ? await startViewer(sessions, project, options.http?.host) : undefined;
  let closeHttp: (() => Promise<void>) | undefined;
  let stopping: Promise<never> | undefined;
  const stop = (code: number): Promise<never> => {
    stopping ??= (async () => {
      setTimeout(() => process.exit(code), SHUTDOWN_LIMIT_MS).unref();
      closeViewer?.();
      await closeHttp?.().catch((error) => log.error("shutdown:", describe(error)));
      await sessions.shutdown().catch((error) => log.error("shutdown:", describe(error)));
      await sessions.journal.persisted().catch((error) => log.error("journal:", describe(error)));
      await sandbox?.stop();
      process.exit(code);
    })();
    return stopping;
  };
  process.on("SIGTERM", () => void stop(0));
  process.on("SIGINT", () => void stop(0));
  process.on("SIGHUP", () => void stop(0));

  if (options.http) {
    closeHttp = await startHttp(sessions, options.http, settings);
    serving();
    return;
  }
  const scope = new SessionScope(sessions, { earlierJournal: true });
  // A default session an earlier server of this project parked is adopted before the first request, so
  // python_health already shows it (a few milliseconds; nothing at all when nothing was parked).
  await sessions.keptReady(scope.default);
  const served = serveStdio(clientContext(scope, settings), servingAfterOpening());
  await served;
  await stop(0);
}

function launchDirectory(): string {
  try {
    return realpathSync(process.cwd());
  } catch (error) {
    log.error(`cannot resolve the launch directory: ${describe(error)}`);
    process.exit(1);
  }
}

/** The durable journal of --journal; a file that cannot be the journal stops the server. */
function journalOf(path: string | undefined, project: string): Journal | undefined {
  if (path === undefined) return undefined;
  try {
    return openDurableJournal(resolve(project, path));
  } catch (error) {
    process.stderr.write(`repl-mcp: error: ${describe(error)}\n`);
    process.exit(1);
  }
}

/**
 * Kernels an earlier server started and left behind when it was killed are shut down now, in the
 * background: a kernel server that is down must not delay serving.
 */
function collectOrphanKernels(sessions: Sessions): void {
  sessions
    .collectOrphanKernels()
    .then(
      (stopped) => stopped > 0 && log.info(`shut down ${stopped} kernel(s) an earlier repl-mcp left running`),
    )
    .catch((error) => log.warn(`kernels left by an earlier repl-mcp: ${describe(error)}`));
}

/** The viewer (--viewer), loaded only then; a refusal ends the process with status 2. */
async function startViewer(sessions: Sessions, project: string, httpHost: string | undefined) {
  const { startViewer, ViewerStartError } = await import("./viewer/start.ts");
  try {
    const viewer = startViewer(sessions, { project, httpHost });
    process.stderr.write(`repl-mcp: viewer at ${viewer.url}\n`);
    return () => viewer.close();
  } catch (error) {
    if (!(error instanceof ViewerStartError)) throw error;
    process.stderr.write(`repl-mcp: error: ${error.message}\n`);
    await sessions.shutdown().catch(() => undefined);
    process.exit(2);
  }
}

/** Listens until a signal; a refusal (no safe token, port taken) ends the process with status 2. */
async function startHttp(sessions: Sessions, http: HttpOptions, settings: ClientSettings) {
  // Loaded on demand: a stdio server never pages in the HTTP transport (nor node:crypto with it).
  const [{ serveHttp }, { chooseToken, noAuthWarning, publishToken, StartupError, TOKEN_ENV }] =
    await Promise.all([import("./server/http/serve.ts"), import("./server/http/token.ts")]);
  try {
    const { token, generated } = chooseToken(http, process.env[TOKEN_ENV]);
    const server = serveHttp(sessions, { ...http, token, settings });
    const published = generated ? publishToken(token as string, server.url) : undefined;
    if (http.noAuth) process.stderr.write(noAuthWarning());
    // The URL line comes last: a launcher that waits for it has everything else by then. stdout stays empty.
    process.stderr.write(`${published?.notice ?? ""}repl-mcp: serving MCP over HTTP at ${server.url}\n`);
    return async () => {
      published?.remove();
      await server.close();
    };
  } catch (error) {
    if (!(error instanceof StartupError)) throw error;
    process.stderr.write(`repl-mcp: error: ${error.message}\n`);
    await sessions.shutdown().catch(() => undefined);
    process.exit(2);
  }
}

/** The --kernels file's servers (none without it); a file that does not hold stops the server. */
function kernelServersOf(
  path: string | undefined,
  project: string,
): { servers: KernelServer[]; secretFiles: string[] } {
  if (path === undefined) return { servers: [], secretFiles: [] };
  try {
    const loaded = loadKernelServers(resolve(project, path));
    withholdFromChildren(loaded.secretVariables);
    return loaded;
  } catch (error) {
    process.stderr.write(`repl-mcp: error: ${describe(error)}\n`);
    process.exit(1);
  }
}

/**
 * --sandbox: the policy read and the sandbox proven to contain before anything is served; a server that
 * cannot contain stops here with one line saying why (docs/sandbox.md).
 */
async function startSandbox(options: ServeOptions, project: string, kernelFiles: string[]) {
  if (options.sandbox === undefined) return undefined;
  const { containCells } = await import("./sandbox/start.ts");
  try {
    return await containCells({
      policy: options.sandbox === BUILTIN_SANDBOX ? undefined : resolve(project, options.sandbox),
      project,
      config: options.config === undefined ? undefined : resolve(project, options.config),
      journal: options.journal === undefined ? undefined : resolve(project, options.journal),
      kernelFiles,
    });
  } catch (error) {
    process.stderr.write(`repl-mcp: error: ${describe(error)}\n`);
    process.exit(1);
  }
}
