// Where the HTTP bearer token comes from, and when the server must refuse to start without one.
// A token file must be private (no group or other permission bits), like an SSH key.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { HTTP_TOKEN_FILE_MAX_BYTES, HTTP_TOKEN_MIN_CHARS } from "../../limits.ts";

export const TOKEN_ENV = "REPL_MCP_HTTP_TOKEN";

/** A start-up refusal: printed as one line, exit status 2. */
export class StartupError extends Error {}

/** The configured token, or undefined when none is configured. */
export function loadToken(file: string | undefined, env: string | undefined): string | undefined {
  if (file !== undefined && env !== undefined && env !== "") {
    throw new StartupError(`give the token once: --auth-token-file or $${TOKEN_ENV}, not both`);
  }
  const token = file !== undefined ? readTokenFile(file) : env;
  if (token === undefined || token === "") return undefined;
  const source = file !== undefined ? `the token in ${file}` : `$${TOKEN_ENV}`;
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

function readTokenFile(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw new StartupError(`cannot read --auth-token-file ${path}: ${(error as Error).message}`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new StartupError(`--auth-token-file ${path} is not a regular file`);
    if ((stat.mode & 0o077) !== 0) {
      const mode = (stat.mode & 0o777).toString(8).padStart(3, "0");
      throw new StartupError(
        `--auth-token-file ${path} has mode ${mode}: others could read the token; run \`chmod 600 ${path}\``,
      );
    }
    if (stat.size > HTTP_TOKEN_FILE_MAX_BYTES) {
      throw new StartupError(`--auth-token-file ${path} is larger than ${HTTP_TOKEN_FILE_MAX_BYTES} bytes`);
    }
    const buffer = Buffer.alloc(HTTP_TOKEN_FILE_MAX_BYTES + 1);
    const length = readSync(fd, buffer, 0, buffer.length, 0);
    // Editors and `echo` add a final newline; surrounding whitespace is never part of a token.
    return buffer.subarray(0, length).toString("utf8").trim();
  } finally {
    closeSync(fd);
  }
}

/** Loopback addresses and the name localhost; everything else (0.0.0.0 included) is reachable from outside. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return bare === "localhost" || bare === "::1" || /^127(\.\d{1,3}){3}$/.test(bare);
}
