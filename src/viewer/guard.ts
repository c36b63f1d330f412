// Who may use the viewer. It shows everything the agent ran and can cancel it, so it is guarded like the
// HTTP transport: the Host must name this loopback listener (DNS rebinding), an Origin, when sent, must
// be the viewer's own, and every request must carry the token: in the URL once (the page then trades it
// for an HttpOnly, SameSite=Strict cookie), in that cookie afterwards. Tokens are compared as SHA-256
// digests, so the time taken says nothing about how much of a guess was right.
import { createHash, timingSafeEqual } from "node:crypto";

export interface ViewerRefusal {
  status: 401 | 403;
  message: string;
}

export class ViewerGuard {
  private readonly digest: Buffer;
  private readonly hosts: Set<string>;
  private readonly origins: Set<string>;
  /** Cookies are not kept apart by port: the name carries it, so two viewers never overwrite each other. */
  readonly cookieName: string;

  constructor(
    private readonly token: string,
    port: number,
  ) {
    this.digest = sha256(token);
    this.hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
    this.origins = new Set([...this.hosts].map((host) => `http://${host}`));
    this.cookieName = `repl_mcp_viewer_${port}`;
  }

  /** Host and Origin; `sameOrigin` (state changes) also requires the Origin to be present. */
  checkPlace(request: Request, sameOrigin: boolean): ViewerRefusal | undefined {
    const host = (request.headers.get("host") ?? "").toLowerCase();
    if (!this.hosts.has(host)) {
      return { status: 403, message: "Host not allowed: open the viewer at the 127.0.0.1 URL it printed" };
    }
    const origin = request.headers.get("origin");
    if ((origin !== null || sameOrigin) && !this.origins.has((origin ?? "").toLowerCase())) {
      return { status: 403, message: "Origin not allowed: only the viewer's own page may do this" };
    }
    return undefined;
  }

  /** True when the request carries the token (in the cookie, or in the query when `fromQuery`). */
  authorized(request: Request, url: URL, fromQuery: boolean): boolean {
    const candidates = [this.cookieToken(request)];
    if (fromQuery) candidates.push(url.searchParams.get("token") ?? undefined);
    // Every candidate is compared, so whether the cookie or the query matched takes the same time.
    let ok = false;
    for (const candidate of candidates) {
      if (timingSafeEqual(sha256(candidate ?? ""), this.digest) && candidate !== undefined) ok = true;
    }
    return ok;
  }

  queryToken(url: URL): boolean {
    return url.searchParams.has("token");
  }

  setCookie(): string {
    return `${this.cookieName}=${this.token}; HttpOnly; SameSite=Strict; Path=/`;
  }

  private cookieToken(request: Request): string | undefined {
    const header = request.headers.get("cookie");
    if (!header) return undefined;
    for (const part of header.split(";")) {
      const at = part.indexOf("=");
      if (at !== -1 && part.slice(0, at).trim() === this.cookieName) return part.slice(at + 1).trim();
    }
    return undefined;
  }
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}
