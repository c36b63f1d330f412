// The credential file of an authorization-code grant (docs/broker.md, OAuth: "The credential file"): one JSON object a user may read
// and edit, holding the client registration and the token endpoint's response as it arrived. It is
// private (0600, a regular file owned by the user, never a symlink), at most 64 KiB, bound to the
// server URL it was granted for, and only ever rewritten whole (in place: fs/in-place.ts).
import { dirname } from "node:path";
import * as v from "valibot";
import { ReplError } from "../../errors.ts";
import { rewritePrivateFileAsync, unfinishedRewrite } from "../../fs/in-place.ts";
import { ensurePrivateDirectory } from "../../fs/private-dir.ts";
import { PrivateFileError, readPrivateFile } from "../../fs/private-file.ts";
import { OAUTH_CREDENTIAL_FILE_MAX_BYTES, OAUTH_REFRESH_MARGIN_SECONDS } from "../../limits.ts";

export const OAUTH_GRANT_REQUIRED =
  "Independent OAuth grant required: run repl-mcp --config REGISTRY --oauth-login SERVER";
const LOGIN_AGAIN = "run repl-mcp --config REGISTRY --oauth-login SERVER again";

const TokenResponse = v.looseObject({
  access_token: v.pipe(v.string(), v.minLength(1)),
  token_type: v.string(),
  expires_in: v.optional(v.union([v.number(), v.pipe(v.string(), v.regex(/^\d+$/))])),
  refresh_token: v.optional(v.string()),
  scope: v.optional(v.string()),
});
export type TokenResponse = v.InferOutput<typeof TokenResponse>;

const Client = v.looseObject({
  client_id: v.pipe(v.string(), v.minLength(1)),
  client_secret: v.optional(v.string()),
  /** The authorization server the client is registered with (tokens go to no other). */
  issuer: v.string(),
  token_endpoint: v.pipe(v.string(), v.url()),
  token_endpoint_auth_method: v.optional(v.string()),
  redirect_uri: v.optional(v.string()),
});

export const CredentialFile = v.looseObject({
  server_url: v.string(),
  client: Client,
  token_received_at: v.pipe(v.number(), v.integer()),
  token_response: TokenResponse,
});
export type CredentialFile = v.InferOutput<typeof CredentialFile>;

function problem(message: string): ReplError {
  return new ReplError("CREDENTIALS_MISSING", message);
}

const LABEL = "OAuth credential file";

/**
 * Loads the grant for `serverUrl`; `null` when there is no file. Every other defect is an error that
 * names the defect and the fix, never a value from the file.
 */
export function readCredentialFile(path: string, serverUrl: string): CredentialFile | null {
  let text: string | null;
  try {
    text = readPrivateFile(path, LABEL, OAUTH_CREDENTIAL_FILE_MAX_BYTES);
  } catch (error) {
    if (error instanceof PrivateFileError) throw problem(`${error.message}; or ${LOGIN_AGAIN}`);
    throw problem("Cannot read the OAuth credential file; check its path and permissions");
  }
  if (text === null) return null;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // Read while it was being rewritten in place, or cut short by a crash: its copy is whole.
    const whole = unfinishedRewrite(path);
    try {
      json = JSON.parse(whole ?? "");
    } catch {
      throw problem(`OAuth credential file is not valid JSON; ${LOGIN_AGAIN}`);
    }
  }
  const parsed = v.safeParse(CredentialFile, json);
  if (!parsed.success) {
    const field = parsed.issues[0].path?.map((item) => String(item.key)).join(".") ?? "file";
    throw problem(`OAuth credential file has an invalid "${field}"; ${LOGIN_AGAIN}`);
  }
  if (!sameResource(parsed.output.server_url, serverUrl)) {
    throw problem(`OAuth credential file was granted for a different server URL; ${LOGIN_AGAIN}`);
  }
  return parsed.output;
}

export async function writeCredentialFile(path: string, file: CredentialFile): Promise<void> {
  const text = `${JSON.stringify(file, null, 2)}\n`;
  if (Buffer.byteLength(text) > OAUTH_CREDENTIAL_FILE_MAX_BYTES) {
    throw problem("The token response would make the OAuth credential file exceed 64 KiB; nothing was saved");
  }
  // In place: a contained cell must not read it, and a rename over it would undo the mount that hides it.
  await rewritePrivateFileAsync(path, text);
}

function sameResource(a: string, b: string): boolean {
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return false;
  }
}

/** UNIX seconds at which the access token stops working, or null when the server gave no lifetime. */
export function expiresAt(file: CredentialFile): number | null {
  const lifetime = file.token_response.expires_in;
  return lifetime === undefined ? null : file.token_received_at + Number(lifetime);
}

/** Whether the access token must be refreshed before it is used. */
export function needsRefresh(file: CredentialFile, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  const end = expiresAt(file);
  return end !== null && end - nowSeconds <= OAUTH_REFRESH_MARGIN_SECONDS;
}

/** The credential file's directory exists (created 0700 when missing) and only its owner may enter it. */
export function ensureCredentialDirectory(path: string): void {
  try {
    ensurePrivateDirectory(dirname(path), "OAuth store directory");
  } catch (error) {
    if (error instanceof PrivateFileError) throw problem(error.message);
    throw problem("OAuth store directory cannot be created; check the credentialFile path");
  }
}
