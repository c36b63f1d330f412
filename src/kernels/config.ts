// The kernel servers the user configured (--kernels FILE or REPL_MCP_KERNELS; docs/kernels.md): Jupyter
// servers — a Jupyter Server, a JupyterHub user server, Enterprise Gateway — named by the user, never by
// the model. The file is read once at start and refused there, naming the entry and the field (never a
// value). A token comes from `${VAR}` or a private file; it leaves this module only inside the
// Authorization header of a request to that server.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import * as v from "valibot";
import { describe, ReplError } from "../errors.ts";
import { readPrivateFile } from "../fs/private-file.ts";
import {
  KERNEL_START_TIMEOUT_DEFAULT_SECONDS,
  KERNEL_START_TIMEOUT_MAX_SECONDS,
  KERNEL_TOKEN_FILE_MAX_BYTES,
  KERNELS_FILE_MAX_BYTES,
} from "../limits.ts";
import { fillPlaceholders, PlaceholderError, placeholderNames } from "../text/placeholders.ts";

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const RawServer = v.strictObject({
  url: v.pipe(v.string(), v.minLength(1)),
  token: v.optional(v.pipe(v.string(), v.minLength(1))),
  tokenFile: v.optional(v.pipe(v.string(), v.minLength(1))),
  kernel: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(128))),
  caFile: v.optional(v.pipe(v.string(), v.minLength(1))),
  startTimeoutS: v.optional(
    v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(KERNEL_START_TIMEOUT_MAX_SECONDS)),
  ),
  allowReset: v.optional(v.boolean()),
});

const RawFile = v.strictObject({ kernelServers: v.record(v.string(), v.unknown()) });

/** One kernel server, ready to be reached. */
export interface KernelServer {
  name: string;
  /** The base URL, path prefix included, ending in "/"; it carries no credentials. */
  url: string;
  /** The Authorization header value, when the server needs a token. */
  authorization: string | undefined;
  /** The kernelspec sessions get unless they name one; undefined: the server's default. */
  kernel: string | undefined;
  /** Extra CA certificates (PEM) for https. */
  ca: string | undefined;
  startTimeoutMs: number;
  /** May a reset restart a kernel this server did not start. */
  allowReset: boolean;
  /** Plain http to a host other than loopback: tokens and code cross the network unencrypted. */
  insecure: boolean;
}

/** What python_health, python_session_list and doctor show of a server: no token, no credentials. */
export const KernelServerView = v.object({
  name: v.string(),
  url: v.string(),
  kernel: v.nullable(v.string()),
  warning: v.optional(v.string()),
});

export function kernelServerView(server: KernelServer): v.InferOutput<typeof KernelServerView> {
  return {
    name: server.name,
    url: server.url,
    kernel: server.kernel ?? null,
    ...(server.insecure
      ? { warning: "plain http to a host other than loopback: the token and your code travel unencrypted" }
      : {}),
  };
}

const fail = (message: string) => new ReplError("CONFIG_INVALID", `Kernel servers file: ${message}`);

/**
 * Reads and checks the file; relative paths in it (tokenFile, caFile) are the file's own directory's.
 * `secretVariables`: the environment variables its tokens and URLs name, for no child to inherit;
 * `secretFiles`: the file itself and its token files, for no contained cell to read (docs/sandbox.md).
 */
export function loadKernelServers(
  path: string,
  env: NodeJS.ProcessEnv = process.env,
): { servers: KernelServer[]; secretVariables: string[]; secretFiles: string[] } {
  let text: string;
  try {
    const bytes = readFileSync(path);
    if (bytes.length > KERNELS_FILE_MAX_BYTES) throw fail(`${path} exceeds ${KERNELS_FILE_MAX_BYTES} bytes`);
    text = bytes.toString("utf8");
  } catch (error) {
    if (error instanceof ReplError) throw error;
    throw fail(`${path} cannot be read (${describe(error)})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw fail(`${path} is not valid JSON`);
  }
  const file = v.safeParse(RawFile, json);
  if (!file.success) throw fail(`${path} must be {"kernelServers": {"<name>": {...}}} and nothing else`);
  const base = resolve(path, "..");
  const entries = Object.entries(file.output.kernelServers);
  const servers = entries.map(([name, raw]) => kernelServer(name, raw, base, env));
  const secretVariables = entries.flatMap(([, raw]) => {
    const { token, url } = raw as { token?: string; url?: string };
    return [token, url].flatMap((value) => (typeof value === "string" ? placeholderNames(value) : []));
  });
  const secretFiles = [
    resolve(path),
    ...entries.flatMap(([, raw]) => {
      const { tokenFile } = raw as { tokenFile?: unknown };
      return typeof tokenFile === "string" ? [resolve(base, tokenFile)] : [];
    }),
  ];
  return { servers, secretVariables, secretFiles };
}

function kernelServer(name: string, raw: unknown, base: string, env: NodeJS.ProcessEnv): KernelServer {
  const entry = (what: string) => fail(`kernel server "${name}": ${what}`);
  if (!NAME.test(name))
    throw fail(`"${name.slice(0, 64)}" is not a kernel server name (letters, digits, _ . -)`);
  const parsed = v.safeParse(RawServer, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const field = issue.path?.map((item) => String(item.key)).join(".");
    if (issue.type === "strict_object" && field) throw entry(`unknown field "${field}"`);
    throw entry(field ? `bad value for "${field}" (${issue.message})` : "must be an object");
  }
  const fields = parsed.output;
  const url = baseUrl(fields.url, env, entry);
  if (fields.token !== undefined && fields.tokenFile !== undefined)
    throw entry('give "token" or "tokenFile", not both');
  const token =
    fields.tokenFile !== undefined ? tokenFromFile(resolve(base, fields.tokenFile), entry) : fields.token;
  const filled = token === undefined ? undefined : fill(token, env, entry);
  return {
    name,
    url: url.href,
    authorization: filled === undefined ? undefined : `token ${filled}`,
    kernel: fields.kernel,
    ca: fields.caFile === undefined ? undefined : caBundle(resolve(base, fields.caFile), url, entry),
    startTimeoutMs: (fields.startTimeoutS ?? KERNEL_START_TIMEOUT_DEFAULT_SECONDS) * 1000,
    allowReset: fields.allowReset ?? false,
    insecure: url.protocol === "http:" && !isLoopback(url.hostname),
  };
}

function baseUrl(text: string, env: NodeJS.ProcessEnv, entry: (what: string) => ReplError): URL {
  let url: URL;
  try {
    url = new URL(fill(text, env, entry));
  } catch (error) {
    if (error instanceof ReplError) throw error;
    throw entry('"url" is not a URL');
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw entry('"url" must be http or https');
  if (url.username || url.password)
    throw entry('"url" must not carry credentials; put the token in "token" or "tokenFile"');
  if (url.search || url.hash)
    throw entry('"url" must be the server\'s base URL, without a query or fragment');
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url;
}

function fill(value: string, env: NodeJS.ProcessEnv, entry: (what: string) => ReplError): string {
  try {
    return fillPlaceholders(value, env);
  } catch (error) {
    if (!(error instanceof PlaceholderError)) throw error;
    const variable = error.variable ? ` \${${error.variable}}` : "";
    const why = {
      unclosed: "has an unclosed ${ placeholder",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the literal placeholder syntax, shown to users
      invalid_name: "has a placeholder that is not ${NAME}",
      missing: `names the environment variable${variable}, which is not set`,
      empty: `names the environment variable${variable}, which is empty`,
    }[error.problem];
    throw entry(`a value ${why}`);
  }
}

function tokenFromFile(path: string, entry: (what: string) => ReplError): string {
  let text: string | null;
  try {
    text = readPrivateFile(path, `"tokenFile" ${path}`, KERNEL_TOKEN_FILE_MAX_BYTES);
  } catch (error) {
    throw entry(describe(error));
  }
  if (text === null) throw entry(`"tokenFile" ${path} does not exist`);
  const token = text.trim();
  if (!token || /\s/.test(token)) throw entry(`"tokenFile" ${path} must hold one token`);
  return token;
}

function caBundle(path: string, url: URL, entry: (what: string) => ReplError): string {
  if (url.protocol !== "https:") throw entry('"caFile" is for an https "url"');
  try {
    const pem = readFileSync(path, "utf8");
    if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no PEM certificate in it");
    return pem;
  } catch (error) {
    throw entry(`"caFile" ${path} cannot be used (${describe(error)})`);
  }
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host);
}
