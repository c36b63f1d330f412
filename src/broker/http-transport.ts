// Streamable HTTP peers through the SDK's client transport, with the entry's headers, no redirects,
// and every response body bounded: a JSON body at 1 MiB, an event stream at 1 MiB per event.
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { ReplError } from "../errors.ts";
import { BROKER_HTTP_BODY_MAX_BYTES } from "../limits.ts";
import { sizeText } from "../text/size.ts";
import type { HttpEntry } from "./config.ts";
import { challengeOf } from "./oauth/challenge.ts";
import type { TokenSource } from "./oauth/grants.ts";
import { PeerFault } from "./peer-fault.ts";
import { redirectHost } from "./redirect.ts";

function bounded(body: ReadableStream<Uint8Array>, perEvent: boolean): ReadableStream<Uint8Array> {
  let count = 0;
  let previous = -1;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        if (perEvent) {
          // An event ends at a blank line; only the bytes since the last one count.
          for (let i = 0; i < chunk.length; i++) {
            const byte = chunk[i];
            if (byte === 0x0a && previous === 0x0a) count = 0;
            else if (byte !== 0x0d) count++;
            if (byte !== 0x0d) previous = byte as number;
          }
        } else count += chunk.length;
        if (count > BROKER_HTTP_BODY_MAX_BYTES) {
          controller.error(
            new ReplError(
              "LIMIT_EXCEEDED",
              `MCP HTTP response exceeds ${sizeText(BROKER_HTTP_BODY_MAX_BYTES)}`,
            ),
          );
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
}

/** One request, redirects refused and the body bounded; a 401 is returned for the caller to judge. */
async function fetchOnce(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, { ...init, redirect: "manual" });
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => {});
    throw new PeerFault(
      `MCP HTTP peer redirected to ${redirectHost(response, input)}; redirects are refused`,
    );
  }
  if (response.status === 401 || !response.body) return response;
  const eventStream = (response.headers.get("content-type") ?? "").includes("text/event-stream");
  return new Response(bounded(response.body, eventStream), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

const UNAUTHENTICATED = "MCP HTTP peer requires authentication (401); configure credentials";

async function boundedFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetchOnce(input, init);
  if (response.status === 401) {
    await response.body?.cancel().catch(() => {});
    throw new ReplError("CREDENTIALS_MISSING", UNAUTHENTICATED);
  }
  return response;
}

function withBearer(init: RequestInit | undefined, token: string | undefined): RequestInit | undefined {
  if (token === undefined) return init;
  const headers = new Headers(init?.headers);
  headers.set("authorization", `Bearer ${token}`);
  return { ...init, headers };
}

/**
 * Every request carries the current OAuth token (none yet when no well-known metadata said where to ask:
 * then this request's 401 says it). A 401 means the peer refused the request before running it (no
 * token, or one revoked or expired early), so it is the one failure that is repeated: once, with a
 * renewed token. A second 401 is reported; nothing else is ever sent twice.
 */
function oauthFetch(tokens: TokenSource) {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const token = await tokens.accessToken();
    const response = await fetchOnce(input, withBearer(init, token));
    if (response.status !== 401) return response;
    const heard = challengeOf(response);
    await response.body?.cancel().catch(() => {});
    const renewed = await tokens.renewAfterRefusal(token, heard);
    const again = await fetchOnce(input, withBearer(init, renewed));
    if (again.status !== 401) return again;
    await again.body?.cancel().catch(() => {});
    throw new ReplError(
      "CREDENTIALS_MISSING",
      `MCP HTTP peer refused a renewed OAuth token (401); ${tokens.remedy}`,
    );
  };
}

/** `tokens` (OAuth entries) puts a current bearer token on every request, renewed when due or refused. */
export function httpTransport(entry: HttpEntry, tokens?: TokenSource): StreamableHTTPClientTransport {
  return new StreamableHTTPClientTransport(new URL(entry.url), {
    requestInit: { headers: entry.headers, redirect: "manual" },
    fetch: tokens ? oauthFetch(tokens) : boundedFetch,
  });
}
