// Issue 12, defect 13: a stdio peer that writes a line that is not JSON-RPC fails the pending call at
// once (not at its deadline) with an error saying the peer sent invalid data; an HTTP peer's redirect is
// reported as a refused redirect naming only the target host, and one that wants a token the entry lacks
// as missing credentials.
import { afterEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Harness, cellValue as value } from "../support/harness.ts";

const PEERS = resolve(import.meta.dir, "../fixtures/peers");

let h: Harness | undefined;
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const stop of stops.splice(0)) await stop();
});

async function withRegistry(servers: Record<string, unknown>) {
  h = await Harness.start({
    beforeStart: (project) =>
      writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: servers })),
  });
  return h;
}

/** The message the expression raises ("no error" if it does not). */
async function failure(harness: Harness, expression: string): Promise<{ error: string }> {
  return value(
    harness,
    [
      "try:",
      `    ${expression}`,
      "    error = 'no error'",
      "except Exception as e:",
      "    error = str(e)",
      "{'error': error}",
    ].join("\n"),
  );
}

describe("a stdio peer that writes a line that is not JSON-RPC", () => {
  test.each(["text", "json"])(
    "(%s) fails the pending call promptly, and the next call reconnects",
    async (kind) => {
      const harness = await withRegistry({
        bad: {
          command: process.execPath,
          args: [join(PEERS, "stdio-peer.ts")],
          env: { PEER_INVALID_OUTPUT: kind },
        },
      });
      // Waiting for the deadline instead would end in "MCP deadline exceeded", not the peer's fault.
      const { error } = await failure(harness, "mcp.call('bad', 'echo', text='hi', timeout=20)");
      expect(error).toContain("MCP peer sent invalid data");
      expect(error).toContain("request was not retried");
      const journal = await value(harness, "[r['status'] for r in mcp.journal()]");
      expect(journal).toEqual(["outcome_unknown"]);
      // The broken peer was stopped; the next call starts a new one (which fails the same way).
      const again = await failure(harness, "mcp.call('bad', 'echo', text='hi', timeout=20)");
      expect(again.error).toContain("MCP peer sent invalid data");
    },
    60_000,
  );
});

/** Starts the HTTP fixture peer with PEER_REDIRECT (and more env); returns its port. */
async function httpPeer(redirect: string, env: Record<string, string> = {}) {
  const proc = Bun.spawn([process.execPath, join(PEERS, "http-peer.ts"), "0"], {
    env: { ...process.env, PEER_REDIRECT: redirect, ...env },
    stdout: "pipe",
    stderr: "ignore",
  });
  stops.push(async () => {
    proc.kill();
    await proc.exited;
  });
  const first = new TextDecoder().decode((await proc.stdout.getReader().read()).value);
  return JSON.parse(first.split("\n")[0] as string).port as number;
}

describe("an HTTP peer that redirects", () => {
  test("at connect: the error names a refused redirect and the target host only", async () => {
    const port = await httpPeer("all");
    const harness = await withRegistry({ web: { type: "http", url: `http://127.0.0.1:${port}/mcp` } });
    const { error } = await failure(harness, "mcp.list_tools('web')");
    expect(error).toContain("redirect");
    expect(error).toContain("refused");
    expect(error).toContain("elsewhere.example:8443");
    expect(error).not.toContain("secret-in-redirect");
    expect(error).not.toContain("/mcp");
  });

  test("on a call: the call fails with the refused redirect, journaled outcome_unknown", async () => {
    const port = await httpPeer("call");
    const harness = await withRegistry({ web: { type: "http", url: `http://127.0.0.1:${port}/mcp` } });
    expect(await value(harness, "len(mcp.list_tools('web')) > 0")).toBe(true);
    const { error } = await failure(harness, "mcp.call('web', 'echo', text='hi')");
    expect(error).toContain("MCP HTTP peer redirected to elsewhere.example:8443; redirects are refused");
    expect(error).not.toContain("secret-in-redirect");
    expect(await value(harness, "[r['status'] for r in mcp.journal()]")).toEqual(["outcome_unknown"]);
  });
});

describe("an HTTP peer that wants a token the entry lacks", () => {
  test("at connect: credentials_missing, not a broken peer", async () => {
    const port = await httpPeer("", { PEER_TOKEN: "wanted-token" });
    const harness = await withRegistry({ web: { type: "http", url: `http://127.0.0.1:${port}/mcp` } });
    const { error } = await failure(harness, "mcp.list_tools('web')");
    expect(error).toBe("MCP server requires credentials; configure them in the registry, then mcp.refresh()");
    expect(await value(harness, "mcp.explain('web')['status']")).toBe("credentials_missing");
  });
});
