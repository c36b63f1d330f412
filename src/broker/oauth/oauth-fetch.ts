// The fetch every OAuth request goes through: a deadline per request, a bounded body, a copy of a
// token endpoint's JSON exactly as it arrived (the SDK hands back only the fields it knows, and the
// credential file keeps the whole response), and no redirect for a token request: following a 307 or
// 308 would send the code, refresh token or client secret again, to wherever the Location points.
import type { FetchLike } from "@modelcontextprotocol/client";
import {
  BROKER_HTTP_BODY_MAX_BYTES,
  OAUTH_CREDENTIAL_FILE_MAX_BYTES,
  OAUTH_DISCOVERY_TIMEOUT_MS,
  OAUTH_TOKEN_TIMEOUT_MS,
} from "../../limits.ts";
import { redirectHost } from "../redirect.ts";

export interface TokenCapture {
  /** The last successful token response body, parsed but otherwise untouched. */
  response?: Record<string, unknown>;
  /** UNIX seconds when it arrived. */
  receivedAt?: number;
}

async function boundedText(response: Response, max: number): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > max) {
      await reader.cancel().catch(() => {});
      throw new Error("OAuth server response is too large");
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function isTokenRequest(init: RequestInit | undefined): boolean {
  return init?.body instanceof URLSearchParams && init.body.has("grant_type");
}

export function oauthFetch(capture: TokenCapture = {}): FetchLike {
  return async (url, init) => {
    const token = isTokenRequest(init);
    const timeout = AbortSignal.timeout(token ? OAUTH_TOKEN_TIMEOUT_MS : OAUTH_DISCOVERY_TIMEOUT_MS);
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const response = await fetch(url, { ...init, signal, ...(token ? { redirect: "manual" } : {}) });
    if (token && response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => {});
      throw new Error(
        `the token endpoint redirected to ${redirectHost(response, url)}, and token requests never follow a ` +
          "redirect (it would resend the credentials); check the authorization server's token_endpoint",
      );
    }
    const text = await boundedText(
      response,
      token ? OAUTH_CREDENTIAL_FILE_MAX_BYTES : BROKER_HTTP_BODY_MAX_BYTES,
    );
    if (token && response.ok) {
      try {
        const parsed = JSON.parse(text);
        if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
          capture.response = parsed;
          capture.receivedAt = Math.floor(Date.now() / 1000);
        }
      } catch {
        // The SDK reports the malformed body itself.
      }
    }
    return new Response(response.status === 204 || response.status === 304 ? null : text, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}
