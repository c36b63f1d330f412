// The resource indicator (RFC 8707) every token request carries: the server URL of the entry, so a
// token is minted for that server alone. Protected-resource metadata that names another resource is
// refused rather than followed.
import { checkResourceAllowed } from "@modelcontextprotocol/client";
import { ReplError } from "../../errors.ts";

export function resourceFor(serverUrl: string) {
  return async (_default: string | URL, advertised?: string): Promise<URL> => {
    if (
      advertised &&
      !checkResourceAllowed({ requestedResource: serverUrl, configuredResource: advertised })
    ) {
      throw new ReplError(
        "CREDENTIALS_MISSING",
        "The server's protected-resource metadata names a different resource; refusing to request a token for it",
      );
    }
    return new URL(serverUrl);
  };
}
