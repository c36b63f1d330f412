// Where a proxied connection goes, read from what the client sent first: an HTTP request line
// (`CONNECT host:port` or an absolute URI) or a SOCKS5 greeting, login and request. Only the destination
// is read; the runtime's proxy parses and decides everything else.

export interface Destination {
  protocol: "http" | "socks";
  /** Lower case, without IPv6 brackets or a trailing dot: the same spelling the proxy asks about. */
  host: string;
  port: number;
}

export type Reading =
  /** Nothing can be said yet. */
  | { kind: "more" }
  /** Not a proxy request this front understands. */
  | { kind: "invalid" }
  /**
   * The first `before` bytes (a SOCKS greeting and login) can go to the proxy now; the request that names
   * the destination starts there and is not whole yet.
   */
  | ({ kind: "prefix" } & Position)
  /**
   * The destination, named by the request that starts at `before`; for HTTP, the request's head (up to
   * its blank line) ends at `headEnd`.
   */
  | ({ kind: "found"; destination: Destination; headEnd?: number } & Position);

interface Position {
  before: number;
  repliesBefore: number;
  /** SOCKS: where the login message (user and password) is, when the client sent one. */
  login?: { start: number; end: number };
}

const SOCKS_VERSION = 5;
const SOCKS_LOGIN_VERSION = 1;

export function readDestination(bytes: Uint8Array): Reading {
  if (bytes.length === 0) return { kind: "more" };
  return bytes[0] === SOCKS_VERSION ? readSocks(bytes) : readHttp(bytes);
}

/** The normal spelling of a host, as the runtime's matcher and its question use it. */
export function normalHost(host: string): string {
  let name = host.toLowerCase();
  if (name.startsWith("[") && name.endsWith("]")) name = name.slice(1, -1);
  if (name.endsWith(".")) name = name.slice(0, -1);
  return name;
}

export function destinationKey(host: string, port: number | undefined): string {
  return `${normalHost(host)}:${port ?? 0}`;
}

function readHttp(bytes: Uint8Array): Reading {
  const end = bytes.indexOf(0x0a);
  if (end < 0) return { kind: "more" };
  const headEnd = blankLine(bytes);
  if (headEnd === undefined) return { kind: "more" };
  const line = new TextDecoder().decode(bytes.subarray(0, end)).replace(/\r$/, "");
  const match = /^([A-Z]+) (\S+) HTTP\/1\.[01]$/.exec(line);
  if (!match) return { kind: "invalid" };
  const [, method, target] = match as unknown as [string, string, string];
  const destination = method === "CONNECT" ? authority(target, undefined) : absoluteUri(target);
  return destination
    ? { kind: "found", destination, before: 0, repliesBefore: 0, headEnd }
    : { kind: "invalid" };
}

/** Where an HTTP head ends: just after its first empty line (CRLF CRLF, or bare LF LF). */
function blankLine(bytes: Uint8Array): number | undefined {
  for (let i = 0; i + 1 < bytes.length; i++) {
    if (bytes[i] !== 0x0a) continue;
    if (bytes[i + 1] === 0x0a) return i + 2;
    if (bytes[i + 1] === 0x0d && bytes[i + 2] === 0x0a) return i + 3;
  }
  return undefined;
}

function authority(text: string, defaultPort: number | undefined): Destination | undefined {
  const match = /^(\[[^\]]+\]|[^:/?#@]+)(?::(\d{1,5}))?$/.exec(text);
  if (!match) return undefined;
  const port = match[2] === undefined ? defaultPort : Number(match[2]);
  if (port === undefined || port < 1 || port > 65535) return undefined;
  return { protocol: "http", host: normalHost(match[1] as string), port };
}

function absoluteUri(target: string): Destination | undefined {
  const match = /^(https?):\/\/(?:[^/?#@]*@)?([^/?#]+)/i.exec(target);
  if (!match) return undefined;
  return authority(match[2] as string, (match[1] as string).toLowerCase() === "https" ? 443 : 80);
}

function readSocks(bytes: Uint8Array): Reading {
  // Greeting: version, method count, methods.
  if (bytes.length < 2) return { kind: "more" };
  const greeting = 2 + (bytes[1] as number);
  if (bytes.length < greeting) return { kind: "more" };
  let at = greeting;
  let login: { start: number; end: number } | undefined;
  const prefix = (): Reading => ({
    kind: "prefix",
    before: at,
    repliesBefore: login ? 2 : 1,
    ...(login ? { login } : {}),
  });
  // Username/password login (RFC 1929): version 1, length-prefixed user and password.
  if (bytes[at] === SOCKS_LOGIN_VERSION) {
    const userEnd = at + 2 + (bytes[at + 1] ?? 0);
    const end = userEnd + 1 + (bytes[userEnd] ?? 0);
    if (bytes.length < at + 2 || bytes.length < userEnd + 1 || bytes.length < end) return prefix();
    login = { start: at, end };
    at = end;
  }
  const request = bytes.subarray(at);
  if (request.length === 0) return prefix();
  if (request[0] !== SOCKS_VERSION) return { kind: "invalid" };
  const target = socksTarget(request);
  if (target === "more") return prefix();
  if (target === undefined) return { kind: "invalid" };
  return { ...(prefix() as Position), kind: "found", destination: { protocol: "socks", ...target } };
}

/** The host and port of a SOCKS5 request (version, command, reserved, address type, address, port). */
function socksTarget(request: Uint8Array): { host: string; port: number } | "more" | undefined {
  if (request.length < 5) return "more";
  const type = request[3];
  let host: string;
  let at: number;
  if (type === 1) {
    if (request.length < 10) return "more";
    host = [...request.subarray(4, 8)].join(".");
    at = 8;
  } else if (type === 3) {
    const length = request[4] as number;
    if (request.length < 5 + length + 2) return "more";
    host = new TextDecoder().decode(request.subarray(5, 5 + length));
    at = 5 + length;
  } else if (type === 4) {
    if (request.length < 22) return "more";
    const words: string[] = [];
    for (let i = 4; i < 20; i += 2)
      words.push((((request[i] as number) << 8) | (request[i + 1] as number)).toString(16));
    host = words.join(":");
    at = 20;
  } else {
    return undefined;
  }
  return { host: normalHost(host), port: ((request[at] as number) << 8) | (request[at + 1] as number) };
}
