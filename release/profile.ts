// Records a bytecode-order profile: which compiled functions a binary uses in one short, scripted MCP
// session. Built again with `--bytecode-order`, the binary keeps the bytecode it really runs together
// at the front of its embedded bundle, so a server reads far fewer of those pages (about 2 MiB less
// memory per server, and less per guardian). The session runs in an empty temporary home, so a
// developer's registry, journal or environment never shapes a release build.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A server's command line and the tool calls made to it, in order, after `initialize`. */
export interface ProfileSession {
  args: string[];
  calls: { name: string; arguments: Record<string, unknown> }[];
}

/** How long one recording may take before it is abandoned (it takes well under a second). */
const RECORDING_TIMEOUT_MS = 60_000;

/**
 * The product's session: start-up, the tool list, a few cells (a value, printed output, an error, a
 * value kept between cells) and a health check. Its worker is whatever `python3` is on PATH; without
 * one the cells fail and the profile just covers less.
 */
export const PRODUCT_SESSION: ProfileSession = {
  args: [],
  calls: [
    { name: "execute_python", arguments: { code: "1+1" } },
    { name: "execute_python", arguments: { code: "x = [i * i for i in range(10)]\nprint(x)\nx[-1]" } },
    { name: "execute_python", arguments: { code: "1/0" } },
    { name: "execute_python", arguments: { code: "x" } },
    { name: "python_health", arguments: {} },
  ],
};

/**
 * Runs `binary` through `session` with BUN_BYTECODE_ORDER_OUT set and returns the profiles written into
 * `outdir`: the server's first, then those of the processes it started (its guardians).
 */
export async function recordBytecodeOrder(
  binary: string,
  session: ProfileSession,
  outdir: string,
): Promise<string[]> {
  const home = mkdtempSync(join(tmpdir(), "repl-mcp-profile-"));
  try {
    const proc = Bun.spawn([binary, ...session.args], {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: home,
        XDG_CONFIG_HOME: join(home, "config"),
        XDG_CACHE_HOME: join(home, "cache"),
        XDG_DATA_HOME: join(home, "data"),
        XDG_STATE_HOME: join(home, "state"),
        BUN_BYTECODE_ORDER_OUT: join(outdir, "order.%p"),
      },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: true,
    });
    const stderr = new Response(proc.stderr).text();
    const timer = setTimeout(() => killGroup(proc.pid), RECORDING_TIMEOUT_MS);
    try {
      await converse(proc, session);
      const code = await proc.exited;
      if (code !== 0) throw new Error(`exited with code ${code} at the end of the session`);
    } catch (error) {
      killGroup(proc.pid);
      const said = (await stderr).trim().slice(-2000);
      throw new Error(
        `recording a bytecode profile of ${binary} failed: ${(error as Error).message}${said ? `\n${said}` : ""}`,
      );
    } finally {
      clearTimeout(timer);
    }
    const profiles = readdirSync(outdir)
      .filter((name) => name.startsWith("order."))
      .sort();
    const own = `order.${proc.pid}`;
    if (!profiles.includes(own)) throw new Error(`${binary} wrote no bytecode profile`);
    return [own, ...profiles.filter((name) => name !== own)].map((name) => join(outdir, name));
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** Plays the session over stdio, each request answered before the next, then closes stdin. */
async function converse(proc: Bun.Subprocess<"pipe", "pipe", "pipe">, session: ProfileSession) {
  const replies = lines(proc.stdout);
  const request = async (id: number, method: string, params: Record<string, unknown>) => {
    proc.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    await proc.stdin.flush();
    for (;;) {
      const next = await replies.next();
      if (next.done) throw new Error(`stdout ended before the answer to ${method}`);
      const message = JSON.parse(next.value) as { id?: number; error?: { message: string } };
      if (message.id !== id) continue;
      if (message.error) throw new Error(`${method} failed: ${message.error.message}`);
      return;
    }
  };
  await request(0, "initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "repl-mcp-profile", version: "0" },
  });
  proc.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
  await request(1, "tools/list", {});
  let id = 2;
  for (const call of session.calls) await request(id++, "tools/call", call);
  await proc.stdin.end();
}

async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of stream) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl = buffer.indexOf("\n");
    while (nl >= 0) {
      yield buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      nl = buffer.indexOf("\n");
    }
  }
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {}
}
