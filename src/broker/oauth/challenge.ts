// Where a protected server's OAuth metadata is, learned without sending the server anything it would
// run. A connection looks at RFC 9728's well-known URLs first (the server URL's path appended, then the
// bare one); when neither answers, the 401 of its own first request says it in its WWW-Authenticate. A
// login, which has no request of its own, reads the 401 of a `ping`: the MCP lifecycle allows it before
// `initialize`, and it changes nothing on any server. An unauthenticated `initialize` is never sent to
// find out: a server that does not protect it would run it, and a 2026-only one does not serve it.

import type { FetchLike } from "@modelcontextprotocol/client";
import { extractWWWAuthenticateParams } from "@modelcontextprotocol/client";

export interface Challenge {
  resourceMetadataUrl?: URL;
  scope?: string;
}

const WELL_KNOWN = "/.well-known/oauth-protected-resource";

/** The first well-known protected-resource metadata URL that serves a metadata document, if any. */
export async function wellKnownMetadata(serverUrl: string, fetchFn: FetchLike): Promise<URL | undefined> {
  const server = new URL(serverUrl);
  const path = server.pathname.replace(/\/+$/, "");
  const candidates = [
    ...(path ? [new URL(`${WELL_KNOWN}${path}`, server)] : []),
    new URL(WELL_KNOWN, server),
  ];
  for (const candidate of candidates) {
    try {
      const response = await fetchFn(candidate, { method: "GET", headers: { accept: "application/json" } });
      if (!response.ok) continue;
      const document = (await response.json()) as { resource?: unknown } | null;
      if (document && typeof document.resource === "string") return candidate;
    } catch {
      // Unreachable or not JSON: the next candidate, then the 401, may still say where it is.
    }
  }
  return undefined;
}

/** What a 401 names: the metadata document (which may be where no well-known URL points) and a scope. */
export function challengeOf(response: Response): Challenge {
  if (response.status !== 401) return {};
  const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(response);
  return { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}), ...(scope ? { scope } : {}) };
}

/**
 * For a login, which has no request of its own: what a `ping`'s 401 names. The scope it may name is the
 * one the MCP authorization spec wants requested first, which no metadata document says. {} when the
 * ping is not refused; the SDK's discovery then reads the well-known URLs itself.
 */
export async function loginChallenge(serverUrl: string, fetchFn: FetchLike): Promise<Challenge> {
  try {
    const response = await fetchFn(serverUrl, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "ping" }),
    });
    return challengeOf(response);
  } catch {
    return {};
  }
}
