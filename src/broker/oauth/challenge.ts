// What a protected server says when asked without a token: its 401 names the protected-resource
// metadata document (which may live somewhere discovery would not look) and the scope it wants.

import type { FetchLike } from "@modelcontextprotocol/client";
import { extractWWWAuthenticateParams, LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/client";
import { NAME, VERSION } from "../../version.ts";

export interface Challenge {
  resourceMetadataUrl?: URL;
  scope?: string;
}

/** One unauthenticated initialize; anything but a 401 (or no answer) teaches nothing. */
export async function challenge(serverUrl: string, fetchFn: FetchLike): Promise<Challenge> {
  try {
    const response = await fetchFn(serverUrl, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 0,
        method: "initialize",
        params: {
          protocolVersion: LATEST_PROTOCOL_VERSION,
          capabilities: {},
          clientInfo: { name: `${NAME}-broker`, version: VERSION },
        },
      }),
    });
    if (response.status !== 401) return {};
    const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(response);
    return { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}), ...(scope ? { scope } : {}) };
  } catch {
    return {};
  }
}
