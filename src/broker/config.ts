// One registry entry as the user wrote it, validated strictly, and ${VAR} substitution (docs/broker.md
// "The registry"). Error messages name the server and the field, never a value: values may be secrets.
import * as v from "valibot";
import { type ErrorCodeName, ReplError } from "../errors.ts";
import { SERVER_NAME_MAX_BYTES } from "../limits.ts";
import { fillPlaceholders, PlaceholderError, placeholderNames } from "../text/placeholders.ts";
import { utf8Bytes } from "../text/utf8.ts";

const NonEmpty = v.pipe(v.string(), v.minLength(1));

const OAuth = v.strictObject({
  grantType: v.optional(v.picklist(["authorization_code", "client_credentials"])),
  clientId: v.optional(v.string()),
  clientSecret: v.optional(v.string()),
  credentialFile: v.optional(v.string()),
  redirectPort: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(65_535))),
  scopes: v.optional(v.array(v.string())),
});

/** Calls the person approves before they are sent (src/broker/approval.ts); absent: none. */
const Approve = v.union([v.picklist(["writes", "all"]), v.array(NonEmpty)]);

/** Fields every entry may have, whatever its transport. */
const Policy = {
  disabled: v.optional(v.boolean()),
  brokerAllowed: v.optional(v.boolean()),
  allowedTools: v.optional(v.array(NonEmpty)),
  approve: v.optional(Approve),
};

const StdioFields = {
  command: v.string(),
  args: v.optional(v.array(v.string())),
  env: v.optional(v.record(v.string(), v.string())),
  cwd: v.optional(v.string()),
};
const HttpFields = {
  url: v.string(),
  headers: v.optional(v.record(v.string(), v.string())),
  oauth: v.optional(OAuth),
};

/**
 * An entry as written. `type` may be omitted (a command means stdio, else http); the variant then
 * rejects fields of the other transport as unknown, which is most of the cross-field checking.
 */
export const RawEntry = v.variant("type", [
  v.strictObject({ type: v.literal("stdio"), ...StdioFields, ...Policy }),
  v.strictObject({ type: v.picklist(["http", "streamable-http"]), ...HttpFields, ...Policy }),
]);
export type RawEntry = v.InferOutput<typeof RawEntry>;

const StdioTransport = v.object({
  type: v.literal("stdio"),
  command: v.string(),
  args: v.array(v.string()),
  env: v.record(v.string(), v.string()),
  /** Absolute; defaults to the registry file's directory. */
  cwd: v.string(),
});
export type StdioEntry = v.InferOutput<typeof StdioTransport>;

const HttpTransport = v.object({
  type: v.literal("http"),
  url: v.string(),
  headers: v.record(v.string(), v.string()),
  oauth: v.optional(OAuth),
});
export type HttpEntry = v.InferOutput<typeof HttpTransport>;

/** What a server entry resolves to; the policy does not affect the transport, so aliases share one. */
export const ServerEntry = v.object({
  name: v.string(),
  transport: v.variant("type", [StdioTransport, HttpTransport]),
  allowedTools: v.optional(v.array(v.string())),
  approve: v.optional(Approve),
  /**
   * The values a cell could copy out of the entry's credentials (see entrySecrets): never shown to the
   * person in an approval question (approval.ts).
   */
  secrets: v.array(v.string()),
  /** The source it came from, for explain/health. */
  scope: v.picklist(["project", "user", "local", "config"]),
});
export type ServerEntry = v.InferOutput<typeof ServerEntry>;

export function configError(message: string, code: ErrorCodeName = "CONFIG_INVALID"): ReplError {
  return new ReplError(code, message);
}

/** For entries whose secrets are absent: explain and the agent tell this apart from a malformed file. */
const missingCredentials = (message: string) => configError(message, "CREDENTIALS_MISSING");

export function validServerName(name: string): boolean {
  const bytes = utf8Bytes(name);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we reject
  return bytes >= 1 && bytes <= SERVER_NAME_MAX_BYTES && !/[\u0000-\u001f\u007f]/.test(name);
}

/** Replaces `${NAME}` placeholders from the environment; the messages name no value. */
export function substitute(value: string, env: NodeJS.ProcessEnv): string {
  try {
    return fillPlaceholders(value, env);
  } catch (error) {
    if (!(error instanceof PlaceholderError)) throw error;
    switch (error.problem) {
      case "unclosed":
        throw configError("Unclosed environment placeholder in MCP config");
      case "invalid_name":
        throw configError("Invalid environment placeholder in MCP config");
      case "missing":
        throw missingCredentials("Required environment variable is missing; config values are omitted");
      case "empty":
        throw missingCredentials("Required environment variable is empty; configure credentials explicitly");
    }
  }
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: header values must not contain control characters
const HEADER_VALUE = /^[^\u0000-\u0008\u000a-\u001f\u007f]*$/;
const RESERVED_HEADERS = new Set([
  "accept",
  "mcp-session-id",
  "last-event-id",
  "content-type",
  "mcp-protocol-version",
]);

type Fail = (what: string, code?: ErrorCodeName) => ReplError;

/** Checks an entry's shape; the message names the field at fault, never its value. */
export function parseEntry(name: string, raw: unknown): RawEntry {
  if (!validServerName(name))
    throw configError("MCP server names must be 1..200 bytes without control characters");
  const fail: Fail = (what, code) => configError(`MCP server "${name}": ${what}`, code);
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw fail('invalid value for "entry"');
  const written = raw as Record<string, unknown>;
  const type = written.type ?? (written.command !== undefined ? "stdio" : "http");
  const parsed = v.safeParse(RawEntry, { ...written, type });
  if (parsed.success) return parsed.output;
  const issue = parsed.issues[0];
  const field = issue.path?.map((item) => String(item.key)).join(".") ?? "entry";
  if (issue.type === "variant") throw fail("unsupported transport; use stdio or streamable-http");
  if (issue.type === "strict_object" && issue.input !== undefined) {
    const other = type === "stdio" ? HttpFields : StdioFields;
    if (field in other) {
      throw fail(
        type === "stdio"
          ? "stdio entries cannot have url, headers or oauth"
          : "http entries cannot have command, args, env or cwd",
      );
    }
    throw fail(`unknown field "${field}"`);
  }
  if (field === "command") throw fail("stdio entries need a non-empty command");
  if (field === "url") throw fail("http entries need a url");
  if (field === "approve" || field.startsWith("approve."))
    throw fail('invalid value for "approve"; use "writes", "all" or a list of tool-name patterns');
  throw fail(`invalid value for "${field}"`);
}

/** Resolves a parsed entry; `base` is the directory relative paths resolve against. */
export function resolveEntry(
  name: string,
  entry: RawEntry,
  scope: ServerEntry["scope"],
  base: string,
  env: NodeJS.ProcessEnv,
  resolvePath: (base: string, path: string) => string,
  isDirectory: (path: string) => boolean,
): ServerEntry {
  const fail: Fail = (what, code) => configError(`MCP server "${name}": ${what}`, code);
  const secrets = new Set<string>();
  // Whatever a field takes from the environment may be a credential (a token in args or in the url's
  // query as much as in a header), except in the fields that name files on this machine: hiding a
  // directory's path there would blank every path under it in the arguments the person has to judge.
  const sub = (value: string) => {
    const filled = substitute(value, env);
    for (const variable of placeholderNames(value)) secrets.add(env[variable] as string);
    return filled;
  };
  const path = (value: string) => substitute(value, env);
  const policy = { name, scope, allowedTools: entry.allowedTools, approve: entry.approve };
  if (entry.type === "stdio") {
    if (!entry.command) throw fail("stdio entries need a non-empty command");
    const cwd = entry.cwd === undefined ? base : resolvePath(base, path(entry.cwd));
    if (!isDirectory(cwd)) throw fail("cwd must be an existing directory");
    const envOut: Record<string, string> = {};
    for (const [key, value] of Object.entries(entry.env ?? {})) envOut[key] = sub(value);
    const args = (entry.args ?? []).map(sub);
    for (const value of Object.values(envOut)) secrets.add(value);
    return {
      ...policy,
      secrets: [...secrets],
      transport: { type: "stdio", command: path(entry.command), args, env: envOut, cwd },
    };
  }
  if (!entry.url) throw fail("http entries need a url");
  const headers = resolveHeaders(entry.headers ?? {}, sub, fail);
  const oauth = entry.oauth;
  if (oauth) checkOAuth(oauth, headers, fail);
  const url = resolveUrl(entry.url, sub, fail);
  const clientId = oauth?.clientId === undefined ? undefined : sub(oauth.clientId);
  const clientSecret = oauth?.clientSecret === undefined ? undefined : sub(oauth.clientSecret);
  for (const value of Object.values(headers)) {
    secrets.add(value);
    // "Bearer <token>", "Token <key>": a cell that has the credential copies it without the scheme.
    const credential = /^\s*[A-Za-z][\w.+-]*\s+(\S.*?)\s*$/.exec(value)?.[1];
    if (credential) secrets.add(credential);
  }
  if (clientSecret !== undefined) secrets.add(clientSecret);
  return {
    ...policy,
    secrets: [...secrets],
    transport: {
      type: "http",
      url,
      headers,
      ...(oauth
        ? {
            oauth: {
              ...oauth,
              clientId,
              clientSecret,
              credentialFile:
                oauth.credentialFile === undefined
                  ? undefined
                  : resolvePath(base, path(oauth.credentialFile)),
            },
          }
        : {}),
    },
  };
}

function resolveUrl(written: string, sub: (value: string) => string, fail: Fail): string {
  let url: URL;
  try {
    url = new URL(sub(written));
  } catch (error) {
    if (error instanceof ReplError) throw error;
    throw fail("url is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw fail("url must use http or https");
  if (!url.hostname) throw fail("url needs a host");
  if (url.username || url.password) throw fail("url must not embed a user or password");
  return url.toString();
}

function resolveHeaders(
  written: Record<string, string>,
  sub: (value: string) => string,
  fail: Fail,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(written)) {
    if (!HEADER_NAME.test(key)) throw fail("a header name is not valid HTTP");
    if (RESERVED_HEADERS.has(key.toLowerCase())) throw fail(`header "${key}" is managed by the transport`);
    const resolved = sub(value);
    if (!HEADER_VALUE.test(resolved)) throw fail("a header value is not valid HTTP");
    if (key.toLowerCase() === "authorization" && /^\s*(bearer)?\s*$/i.test(resolved)) {
      throw fail("empty authorization header; configure credentials explicitly", "CREDENTIALS_MISSING");
    }
    headers[key] = resolved;
  }
  return headers;
}

function checkOAuth(oauth: v.InferOutput<typeof OAuth>, headers: Record<string, string>, fail: Fail): void {
  if (Object.keys(headers).some((key) => key.toLowerCase() === "authorization")) {
    throw fail("oauth conflicts with an Authorization header");
  }
  const grant = oauth.grantType ?? "authorization_code";
  if (grant === "authorization_code" && !oauth.credentialFile) {
    throw fail("oauth authorization_code needs credentialFile");
  }
  if (grant === "client_credentials" && !(oauth.clientId && oauth.clientSecret)) {
    throw fail("oauth client_credentials needs clientId and clientSecret", "CREDENTIALS_MISSING");
  }
}

/** A name that is really this server (a recursive broker); such entries are skipped. */
export function isSelf(raw: RawEntry): boolean {
  if (raw.type !== "stdio") return false;
  const command = raw.command;
  if (!command) return false;
  const base = command.split("/").pop() ?? "";
  if (base === "repl-mcp" || base === "repl-mcp.exe") return true;
  const args = raw.args ?? [];
  for (let i = 0; i < args.length - 1; i++) {
    if (args[i] === "-m" && (args[i + 1] === "repl_mcp" || args[i + 1] === "repl_mcp.repl_mcp_server"))
      return true;
  }
  return (base === "uv" || base === "uvx") && args.includes("repl-mcp");
}
