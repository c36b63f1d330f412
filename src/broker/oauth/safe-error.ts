// OAuth failures in words an agent or user can act on, with nothing the server sent back verbatim:
// an authorization server's error_description may echo a secret, so only its registered error code
// (a short token such as invalid_grant) is kept, and every known secret is blanked from the rest.
import { ReplError } from "../../errors.ts";

export function oauthErrorCode(error: unknown): string | undefined {
  const code = (error as { errorCode?: unknown } | null)?.errorCode;
  return typeof code === "string" && /^[a-z_]{1,64}$/.test(code) ? code : undefined;
}

export function redact(text: string, secrets: (string | undefined)[]): string {
  let out = text;
  for (const secret of secrets) if (secret && secret.length >= 4) out = out.split(secret).join("[redacted]");
  return out;
}

/** `what` failed: the OAuth error code when there is one, else the (redacted) local reason. */
export function oauthFailure(
  what: string,
  error: unknown,
  action: string,
  secrets: (string | undefined)[] = [],
): ReplError {
  if (error instanceof ReplError) return error;
  const code = oauthErrorCode(error);
  const reason = code
    ? `the authorization server answered ${code}`
    : redact(error instanceof Error ? error.message : String(error), secrets)
        .replace(/\s+/g, " ")
        .slice(0, 300);
  return new ReplError("CREDENTIALS_MISSING", `${what}: ${reason}; ${action}`);
}
