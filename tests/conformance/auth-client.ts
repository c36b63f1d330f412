// Adapter between the MCP conformance suite (`conformance client --suite auth`) and repl-mcp. The suite
// runs `bun tests/conformance/auth-client.ts <server-url>` with MCP_CONFORMANCE_SCENARIO (and, for some
// scenarios, MCP_CONFORMANCE_CONTEXT) set. The adapter writes a registry whose one entry points at that
// URL, completes the grant headlessly (for authorization-code scenarios it runs `repl-mcp --oauth-login`
// and plays the browser: it follows the printed URL's redirects to the loopback callback), then starts
// repl-mcp as an MCP server and, from a cell, lists the peer's tools and calls the first one.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const BINARY = resolve(process.env.REPL_MCP_BINARY ?? join(import.meta.dir, "../../dist/repl-mcp"));
const serverUrl = process.argv[process.argv.length - 1] as string;
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}") as Record<string, unknown>;
const say = (line: string) => process.stderr.write(`auth-client: ${line}\n`);

function oauthEntry(store: string): Record<string, unknown> {
  const clientId = typeof context.client_id === "string" ? context.client_id : undefined;
  const clientSecret = typeof context.client_secret === "string" ? context.client_secret : undefined;
  if (scenario.startsWith("auth/client-credentials")) {
    return { grantType: "client_credentials", clientId, clientSecret };
  }
  return {
    grantType: "authorization_code",
    credentialFile: join(store, "srv.json"),
    ...(clientId ? { clientId } : {}),
    ...(clientSecret ? { clientSecret } : {}),
  };
}

/** Follows the authorization URL's redirects, as a browser would, until the loopback callback answers. */
async function browse(url: string): Promise<void> {
  let next = url;
  for (let hop = 0; hop < 10; hop++) {
    const response = await fetch(next, { redirect: "manual" });
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location) {
      next = new URL(location, next).href;
      continue;
    }
    say(`browser stopped at ${new URL(next).origin}${new URL(next).pathname} with HTTP ${response.status}`);
    return;
  }
  throw new Error("too many redirects");
}

async function login(dir: string, registry: string): Promise<void> {
  const proc = Bun.spawn([BINARY, "--config", registry, "--oauth-login", "srv"], {
    cwd: dir,
    stdout: "ignore",
    stderr: "pipe",
  });
  const reader = proc.stderr.getReader();
  let text = "";
  while (text.split("\n").length < 3) {
    const { done, value } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const url = text.split("\n")[1];
  if (url?.startsWith("http")) await browse(url);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const code = await proc.exited;
  say(`--oauth-login exited ${code}: ${text.trim().split("\n").slice(2).join(" | ")}`);
}

/**
 * Speaks MCP to the server over stdio as plain JSON-RPC lines: an initialize, one tools/call, then stdin
 * closed. Evaluating the SDK's client here would cost more CPU than the rest of this adapter, and it runs
 * once per scenario; what the suite checks is what repl-mcp then sends to the suite's server.
 */
async function useServer(dir: string, registry: string): Promise<void> {
  const env: Record<string, string> = {};
  // The variables the SDK's stdio transport passes on by default, so the server starts as it would there.
  for (const key of ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"]) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  const proc = Bun.spawn([BINARY, "--config", registry], {
    cwd: dir,
    env,
    stdin: "pipe",
    stdout: "pipe",
    stderr: "inherit",
  });
  const send = (message: Record<string, unknown>) =>
    proc.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
  const waiting = new Map<number, (message: Record<string, any>) => void>();
  void (async () => {
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of proc.stdout) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let end = buffered.indexOf("\n"); end !== -1; end = buffered.indexOf("\n")) {
        const line = buffered.slice(0, end).trim();
        buffered = buffered.slice(end + 1);
        if (!line) continue;
        const message = JSON.parse(line) as Record<string, any>;
        if (message.method !== undefined && message.id !== undefined) {
          // A request from the server: ping is answered, anything else refused, as the SDK client does.
          send(
            message.method === "ping"
              ? { id: message.id, result: {} }
              : { id: message.id, error: { code: -32601, message: "Method not found" } },
          );
        } else if (message.method === undefined) waiting.get(message.id)?.(message);
      }
    }
    for (const answer of waiting.values()) answer({ error: "the server closed its stdout" });
  })();
  const request = (id: number, method: string, params: Record<string, unknown>) =>
    new Promise<Record<string, any>>((resolve) => {
      waiting.set(id, resolve);
      send({ id, method, params });
    });
  try {
    const init = await request(1, "initialize", {
      protocolVersion: "2025-11-25",
      capabilities: {},
      clientInfo: { name: "conformance-adapter", version: "0.0.0" },
    });
    if (init.error) throw new Error(`initialize failed: ${JSON.stringify(init.error)}`);
    send({ method: "notifications/initialized" });
    const code = [
      "tools = mcp.list_tools('srv')",
      "names = [t['name'] for t in tools]",
      "called = mcp.call('srv', names[0], arguments={}) if names else None",
      "names",
    ].join("\n");
    const reply = await request(2, "tools/call", { name: "execute_python", arguments: { code } });
    const out = reply.result?.structuredContent as
      | { success?: boolean; value?: unknown; error?: string }
      | undefined;
    say(
      out?.success
        ? `tools: ${JSON.stringify(out.value)}`
        : `cell failed: ${out?.error ?? JSON.stringify(reply.error)}`,
    );
  } finally {
    // Closing stdin ends the server; it is killed only if it has not left within 2 s.
    proc.stdin.end();
    const timer = setTimeout(() => proc.kill("SIGTERM"), 2_000);
    await proc.exited;
    clearTimeout(timer);
  }
}

const dir = mkdtempSync(join(tmpdir(), "repl-mcp-conformance-"));
try {
  const store = join(dir, "store");
  mkdirSync(store, { mode: 0o700 });
  const registry = join(dir, "registry.json");
  writeFileSync(
    registry,
    JSON.stringify({ mcpServers: { srv: { type: "http", url: serverUrl, oauth: oauthEntry(store) } } }),
  );
  if (!scenario.startsWith("auth/client-credentials")) await login(dir, registry);
  await useServer(dir, registry);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
