// Streamable HTTP peers through the SDK's client transport, with the entry's headers, no redirects,
// and every response body bounded: a JSON body at 1 MiB, an event stream at 1 MiB per event.
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ReplError } from "../errors.ts";
import { BROKER_HTTP_BODY_MAX_BYTES } from "../limits.ts";
import { sizeText } from "../text/size.ts";
import type { HttpEntry } from "./config.ts";
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

async function boundedFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, { ...init, redirect: "manual" });
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => {});
    throw new PeerFault(
      `MCP HTTP peer redirected to ${redirectHost(response, input)}; redirects are refused`,
    );
  }
  if (response.status === 401) {
    throw new ReplError(
      "CREDENTIALS_MISSING",
      "MCP HTTP peer requires authentication (401); configure credentials",
    );
  }
  if (!response.body) return response;
  const eventStream = (response.headers.get("content-type") ?? "").includes("text/event-stream");
  return new Response(bounded(response.body, eventStream), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** `tokens` (OAuth entries) puts a current bearer token on every request, refreshed when due. */
export function httpTransport(entry: HttpEntry, tokens?: TokenSource): StreamableHTTPClientTransport {
  const authorized = tokens
    ? async (input: string | URL | Request, init?: RequestInit) => {
        const headers = new Headers(init?.headers);
        headers.set("authorization", `Bearer ${await tokens.accessToken()}`);
        return boundedFetch(input, { ...init, headers });
      }
    : boundedFetch;
  return new StreamableHTTPClientTransport(new URL(entry.url), {
    requestInit: { headers: entry.headers, redirect: "manual" },
    fetch: authorized,
  });
}
