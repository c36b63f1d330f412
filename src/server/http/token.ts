// Which bearer token an HTTP server requires, and when it must refuse to start instead. A token given
// (a file, or $REPL_MCP_HTTP_TOKEN) must hold one; with none given, a loopback server makes its own for
// this run and keeps it in a private file (as Jupyter does), because any local user can reach loopback.
// Serving without a token takes --no-auth, and only on loopback.
import { unlinkSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { writePrivateFileAtomic } from "../../fs/atomic.ts";
import { ensurePrivateDirectory } from "../../fs/private-dir.ts";
import { PrivateFileError, readPrivateFile } from "../../fs/private-file.ts";
import { runtimeDirectory } from "../../fs/user-dirs.ts";
import { HTTP_TOKEN_ENV } from "../../guardian/env.ts";
import { HTTP_GENERATED_TOKEN_BYTES, HTTP_TOKEN_FILE_MAX_BYTES, HTTP_TOKEN_MIN_CHARS } from "../../limits.ts";

export const TOKEN_ENV = HTTP_TOKEN_ENV;

/** A start-up refusal: printed as one line, exit status 2. */
export class StartupError extends Error {}

export interface TokenChoice {
  /** Undefined only with --no-auth, or off loopback with nothing given (serveHttp refuses that). */
  token: string | undefined;
  /** True when this run made the token: it must be published with `publishToken`. */
  generated: boolean;
}

/** `env` is $REPL_MCP_HTTP_TOKEN as found: set to "" counts as given. */
export function chooseToken(
  http: { host: string; authTokenFile: string | undefined; noAuth: boolean },
  env: string | undefined,
): TokenChoice {
  const file = http.authTokenFile;
  if (file !== undefined && env !== undefined) {
    throw new StartupError(`give the token once: --auth-token-file or $${TOKEN_ENV}, not both`);
  }
  if (http.noAuth) {
    if (file !== undefined || env !== undefined) {
      const other = file !== undefined ? "--auth-token-file" : `$${TOKEN_ENV}`;
      throw new StartupError(`--no-auth contradicts ${other}; drop one of them`);
    }
    if (!isLoopback(http.host)) {
      throw new StartupError(
        `--no-auth only applies to a loopback --host; ${http.host} needs a token (--auth-token-file FILE)`,
      );
    }
    return { token: undefined, generated: false };
  }
  if (file !== undefined)
    return { token: checked(readTokenFile(file), `the token in ${file}`), generated: false };
  if (env !== undefined) return { token: checked(env, `$${TOKEN_ENV}`), generated: false };
  if (!isLoopback(http.host)) return { token: undefined, generated: false };
  const bytes = crypto.getRandomValues(new Uint8Array(HTTP_GENERATED_TOKEN_BYTES));
  return { token: Buffer.from(bytes).toString("hex"), generated: true };
}

function checked(token: string, source: string): string {
  if (token.trim() === "") {
    throw new StartupError(
      source.startsWith("$")
        ? `${source} is set but empty; put a token in it (e.g. \`openssl rand -hex 32\`), or unset it to have one generated`
        : `${source} is empty; write one into it (e.g. \`openssl rand -hex 32\`), or drop the option to have one generated`,
    );
  }
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new StartupError(`${source} must be printable ASCII without spaces (it is sent in a header)`);
  }
  if (token.length < HTTP_TOKEN_MIN_CHARS) {
    throw new StartupError(
      `${source} is shorter than ${HTTP_TOKEN_MIN_CHARS} characters; use e.g. \`openssl rand -hex 32\``,
    );
  }
  return token;
}

/** A private file of ours: no symlink, no FIFO (which would block start-up), nobody else's file. */
function readTokenFile(path: string): string {
  const label = `--auth-token-file ${path}`;
  let text: string | null;
  try {
    text = readPrivateFile(path, label, HTTP_TOKEN_FILE_MAX_BYTES);
  } catch (error) {
    if (error instanceof PrivateFileError) throw new StartupError(error.message);
    throw error;
  }
  if (text === null) throw new StartupError(`${label} does not exist`);
  // Editors and `echo` add a final newline; surrounding whitespace is never part of a token.
  return text.trim();
}

export interface PublishedToken {
  /** The lines to print before the URL line: where the token is and how a client sends it. */
  notice: string;
  /** Removes the file; a token belongs to one run. */
  remove(): void;
}

/** Writes a generated token to `<runtime dir>/http-<host>-<port>.token` (0600, in a 0700 directory). */
export function publishToken(token: string, url: string): PublishedToken {
  const dir = runtimeDirectory();
  const { hostname, port } = new URL(url);
  const path = join(dir, `http-${hostname.replace(/[^\w.-]/g, "_")}-${port}.token`);
  try {
    ensurePrivateDirectory(dir, `the directory for the generated token ${dir}`);
    writePrivateFileAtomic(path, `${token}\n`);
  } catch (error) {
    const reason =
      error instanceof PrivateFileError ? error.message : `cannot write ${path}: ${String(error)}`;
    throw new StartupError(`${reason}; fix or remove it, or give a token with --auth-token-file`);
  }
  const quoted = shellQuote(path);
  return {
    notice: [
      "repl-mcp: no token was given, so this run made one; clients must send " +
        '"Authorization: Bearer <token>" with the token kept in:',
      `  ${path}`,
      "repl-mcp: for Claude Code:",
      `  claude mcp add --transport http repl-mcp ${url} --header "Authorization: Bearer $(cat ${quoted})"`,
      "",
    ].join("\n"),
    remove() {
      try {
        unlinkSync(path);
      } catch {
        // Already gone: nothing to protect.
      }
    },
  };
}

/** The warning --no-auth prints: who else can run code. */
export function noAuthWarning(): string {
  return (
    "repl-mcp: warning: --no-auth: any local user or process that can reach this port can run code as " +
    `${userName()}; use it only where you are the machine's one user\n`
  );
}

function userName(): string {
  try {
    return userInfo().username;
  } catch {
    // A uid without a passwd entry, as in some containers.
    return `uid ${process.geteuid?.()}`;
  }
}

/** Safe inside the double quotes of the printed command: plain paths as they are, others single-quoted. */
function shellQuote(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", `'"'"'`)}'`;
}

/** Loopback addresses and the name localhost; everything else (0.0.0.0 included) is reachable from outside. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return bare === "localhost" || bare === "::1" || /^127(\.\d{1,3}){3}$/.test(bare);
}
