// The viewer (--viewer) as a person and an attacker meet it: its URL read from the server's stderr line,
// a real headless Chromium (Debian's chromium-headless-shell, driven by playwright-core) with a fresh
// profile, an event-stream reader that keeps every event, and raw HTTP requests with any Host header.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";
import { type Harness, waitFor } from "./harness.ts";

export const CHROMIUM = "/usr/lib/chromium/chromium-headless-shell";

/** Why the browser tests cannot run here, or undefined. */
export function browserMissing(): string | undefined {
  return Bun.file(CHROMIUM).size > 0
    ? undefined
    : `${CHROMIUM} is missing (install Debian's chromium-headless-shell)`;
}

export interface ViewerAddress {
  url: string;
  origin: string;
  port: number;
  token: string;
  /** The cookie the page trades the token for. */
  cookie: string;
}

const LINE = /repl-mcp: viewer at (http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]+))\n/;

export function parseViewerLine(stderr: string): ViewerAddress | undefined {
  const match = LINE.exec(stderr);
  if (!match) return undefined;
  const [, url, port, token] = match as unknown as [string, string, string, string];
  return {
    url,
    origin: `http://127.0.0.1:${port}`,
    port: Number(port),
    token,
    cookie: `repl_mcp_viewer_${port}=${token}`,
  };
}

/** The viewer a stdio server printed on stderr. */
export async function viewerOf(h: Harness): Promise<ViewerAddress> {
  await waitFor(() => parseViewerLine(h.stderr) !== undefined, {
    timeoutMs: 15_000,
    what: "the viewer line",
  });
  return parseViewerLine(h.stderr) as ViewerAddress;
}

export class Browser {
  private constructor(
    readonly context: BrowserContext,
    private readonly profile: string,
  ) {}

  static async launch(): Promise<Browser> {
    const profile = mkdtempSync(join(tmpdir(), "repl-mcp-chromium-"));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
      viewport: { width: 1100, height: 900 },
    });
    return new Browser(context, profile);
  }

  async close(): Promise<void> {
    await this.context.close().catch(() => undefined);
    rmSync(this.profile, { recursive: true, force: true });
  }
}

export interface ViewerEvent {
  type: string;
  [key: string]: any;
}

/** One page's event stream, read as fast as it comes (or not at all, with `read: false`). */
export class EventReader {
  readonly events: ViewerEvent[] = [];
  status = 0;
  private readonly abort = new AbortController();
  private done: Promise<void>;

  constructor(viewer: ViewerAddress) {
    this.done = (async () => {
      const response = await fetch(`${viewer.origin}/events`, {
        headers: { cookie: viewer.cookie },
        signal: this.abort.signal,
      });
      this.status = response.status;
      if (!response.body) return;
      const decoder = new TextDecoder();
      let buffered = "";
      for await (const chunk of response.body) {
        buffered += decoder.decode(chunk, { stream: true });
        let end = buffered.indexOf("\n\n");
        while (end !== -1) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          if (block.startsWith("data: ")) this.events.push(JSON.parse(block.slice(6)));
          end = buffered.indexOf("\n\n");
        }
      }
    })().catch(() => undefined);
  }

  of(type: string): ViewerEvent[] {
    return this.events.filter((event) => event.type === type);
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.done;
  }
}

export interface RawResponse {
  status: number;
  head: string;
  body: string;
}

/** One HTTP/1.1 request written by hand, so the Host header is whatever the test says. */
export function rawRequest(port: number, lines: string[], body = ""): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.on("connect", () => {
      socket.write(
        `${[...lines, "Connection: close", `Content-Length: ${Buffer.byteLength(body)}`].join("\r\n")}\r\n\r\n${body}`,
      );
    });
    socket.on("data", (chunk) => {
      received += chunk.toString();
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const split = received.indexOf("\r\n\r\n");
      const head = received.slice(0, split);
      resolve({ status: Number(head.split(" ")[1]), head, body: received.slice(split + 4) });
    });
  });
}

/** TCP ports `pid` listens on (from /proc), so a test can tell that nothing else listens. */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // Closed meanwhile.
    }
  }
  const ports: number[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // State 0A is LISTEN; field 9 is the socket's inode.
      if (fields[3] === "0A" && inodes.has(fields[9] ?? "")) {
        ports.push(Number.parseInt((fields[1] ?? "").split(":")[1] ?? "0", 16));
      }
    }
  }
  return ports;
}
