// What a server's OAuth credentials look like on disk, for `repl-mcp doctor` and explain: read-only,
// never networked, never a secret in the answer.
import { lstatSync } from "node:fs";
import { describe } from "../../errors.ts";
import type { ServerEntry } from "../config.ts";
import { expiresAt, needsRefresh, OAUTH_GRANT_REQUIRED, readCredentialFile } from "./credential-file.ts";

export interface CredentialProblem {
  problem: string;
  action: string;
}

export interface CredentialStatus {
  grant: "authorization_code" | "client_credentials";
  /** The credential file (authorization_code only). */
  file: string | null;
  present: boolean;
  /** Permission bits as octal text, e.g. "0600", when the file exists. */
  mode: string | null;
  /** UNIX seconds when the stored access token expires; null when unknown or no file. */
  expires_at: number | null;
  /** Expired or within the refresh margin: the next connect refreshes it. */
  expired: boolean | null;
  refreshable: boolean | null;
  problems: CredentialProblem[];
}

const LOGIN = "Run repl-mcp --config REGISTRY --oauth-login SERVER";

/** The credential status of an OAuth entry; null for entries without OAuth. */
export function credentialStatus(entry: ServerEntry): CredentialStatus | null {
  const transport = entry.transport;
  if (transport.type !== "http" || !transport.oauth) return null;
  const grant = transport.oauth.grantType ?? "authorization_code";
  const status: CredentialStatus = {
    grant,
    file: null,
    present: false,
    mode: null,
    expires_at: null,
    expired: null,
    refreshable: null,
    problems: [],
  };
  if (grant === "client_credentials") return status;
  const path = transport.oauth.credentialFile as string;
  status.file = path;
  try {
    const stat = lstatSync(path);
    status.present = true;
    status.mode = `0${(stat.mode & 0o777).toString(8).padStart(3, "0")}`;
  } catch {
    status.problems.push({ problem: OAUTH_GRANT_REQUIRED, action: LOGIN });
    return status;
  }
  try {
    const file = readCredentialFile(path, transport.url);
    if (!file) return status;
    status.expires_at = expiresAt(file);
    status.expired = status.expires_at === null ? false : needsRefresh(file);
    status.refreshable = Boolean(file.token_response.refresh_token);
    if (status.expired && !status.refreshable) {
      status.problems.push({
        problem: "The access token has expired and cannot be refreshed",
        action: LOGIN,
      });
    }
  } catch (error) {
    status.problems.push({ problem: describe(error), action: LOGIN });
  }
  return status;
}
