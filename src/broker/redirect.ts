// Naming the target of a redirect that is refused (by MCP HTTP peers and OAuth token endpoints alike).

/** Where a redirect pointed, host (and port) only: a path or query may carry credentials. */
export function redirectHost(response: Response, input: string | URL | Request): string {
  const location = response.headers.get("location");
  const base = input instanceof Request ? input.url : String(input);
  try {
    return location ? new URL(location, base).host || "an unnamed host" : "an unnamed location";
  } catch {
    return "an unreadable location";
  }
}
