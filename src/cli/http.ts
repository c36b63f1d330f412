// The flags of --transport http, checked before anything starts. They mean nothing over stdio, so giving
// one there is a usage mistake rather than something silently ignored.
import { HTTP_IDLE_TIMEOUT_MAX_SECONDS, HTTP_PORT_DEFAULT } from "../limits.ts";

/** --transport http and its flags; absent for stdio. */
export interface HttpOptions {
  host: string;
  port: number;
  authTokenFile: string | undefined;
  /** --no-auth: serve loopback without a token. */
  noAuth: boolean;
  allowedOrigins: string[];
  allowedHosts: string[];
  idleTimeoutS: number;
}

// --idle-timeout-s has a default, so it cannot be told apart from an absent flag: it is not listed.
const HTTP_ONLY = ["host", "port", "auth-token-file", "no-auth", "allowed-origin", "allowed-host"] as const;

/** Undefined for stdio; `fail` reports a usage mistake. */
export function httpOptions(parsed: Record<string, unknown>, fail: (message: string) => never) {
  if (parsed.transport !== "http") {
    const stray = HTTP_ONLY.find((name) => parsed[name] !== undefined);
    if (stray) fail(`--${stray} only applies with --transport http`);
    return undefined;
  }
  const port = String(parsed.port ?? HTTP_PORT_DEFAULT);
  if (!/^\d+$/.test(port) || Number(port) > 65_535) {
    fail(`--port takes a TCP port 0..65535, 0 for any free one (got "${port}")`);
  }
  const idle = String(parsed["idle-timeout-s"]);
  if (!/^\d+$/.test(idle) || Number(idle) < 1 || Number(idle) > HTTP_IDLE_TIMEOUT_MAX_SECONDS) {
    fail(`--idle-timeout-s takes whole seconds, 1..${HTTP_IDLE_TIMEOUT_MAX_SECONDS} (got "${idle}")`);
  }
  return {
    host: String(parsed.host ?? "127.0.0.1"),
    port: Number(port),
    authTokenFile: parsed["auth-token-file"] as string | undefined,
    noAuth: parsed["no-auth"] === true,
    allowedOrigins: commaList(parsed["allowed-origin"]),
    allowedHosts: commaList(parsed["allowed-host"]),
    idleTimeoutS: Number(idle),
  } satisfies HttpOptions;
}

function commaList(value: unknown): string[] {
  if (value === undefined) return [];
  return String(value)
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}
