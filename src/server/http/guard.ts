// The checks every HTTP request passes before MCP sees it: Host and Origin against allow lists (a web
// page must not reach the REPL through DNS rebinding or a cross-site request), then the bearer token.
import { createHash, timingSafeEqual } from "node:crypto";

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];

export interface GuardOptions {
  /** The address the server listens on (added to the Host list unless it is a wildcard). */
  bindHost: string;
  allowedHosts: string[];
  allowedOrigins: string[];
  token: string | undefined;
}

export interface Refusal {
  status: 401 | 403;
  message: string;
}

export class Guard {
  private readonly hosts: Set<string>;
  private readonly anyHost: boolean;
  private readonly origins: Set<string>;
  private readonly digest: Buffer | undefined;

  constructor(options: GuardOptions) {
    this.anyHost = options.allowedHosts.includes("*");
    const bind = hostnameOf(
      options.bindHost.includes(":") && !options.bindHost.startsWith("[")
        ? `[${options.bindHost}]`
        : options.bindHost,
    );
    const wildcard = bind === "0.0.0.0" || bind === "[::]";
    this.hosts = new Set([
      ...LOOPBACK_NAMES,
      ...(bind && !wildcard ? [bind] : []),
      ...options.allowedHosts.map(hostnameOf).filter((name): name is string => name !== undefined),
    ]);
    this.origins = new Set(options.allowedOrigins.map(originOf).filter((o): o is string => o !== undefined));
    this.digest = options.token === undefined ? undefined : sha256(options.token);
  }

  check(request: Request): Refusal | undefined {
    const host = hostnameOf(request.headers.get("host") ?? "");
    if (!this.anyHost && (host === undefined || !this.hosts.has(host))) {
      return { status: 403, message: "Host header not allowed; add the name with --allowed-host" };
    }
    const origin = request.headers.get("origin");
    if (origin !== null && !this.originAllowed(origin)) {
      return { status: 403, message: "Origin not allowed; add it with --allowed-origin" };
    }
    if (this.digest && !this.tokenMatches(request.headers.get("authorization"))) {
      return { status: 401, message: "Missing or wrong bearer token (Authorization: Bearer <token>)" };
    }
    return undefined;
  }

  private originAllowed(origin: string): boolean {
    const normalized = originOf(origin);
    if (normalized === undefined) return false;
    const host = hostnameOf(new URL(normalized).host);
    return (host !== undefined && LOOPBACK_NAMES.includes(host)) || this.origins.has(normalized);
  }

  /** Both sides are hashed first, so the comparison takes the same time whatever the length or content. */
  private tokenMatches(header: string | null): boolean {
    const given = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "")?.[1] ?? "";
    return timingSafeEqual(sha256(given), this.digest as Buffer);
  }
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** The lower-case host name of a Host header value (port dropped, IPv6 kept in brackets). */
function hostnameOf(value: string): string | undefined {
  if (value === "" || /[\s/@?#]/.test(value)) return undefined;
  try {
    return new URL(`http://${value}`).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

function originOf(value: string): string | undefined {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : undefined;
  } catch {
    return undefined;
  }
}
