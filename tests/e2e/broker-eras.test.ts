// The broker reaches downstream servers of either protocol era through the same registry, allowlists,
// argument checks, journal and no-retry rules: a 2026-07-28-only peer (it refuses `initialize` with
// -32022) and a legacy-only one, over stdio and over HTTP. A stdio peer is started once, whatever its era,
// and a legacy peer that never answers requests it does not know costs no probe timeout.
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type HttpPeer, launchHttpPeer } from "../fixtures/peers/launch.ts";
import { Harness, cellValue as value } from "../support/harness.ts";

const PEERS = resolve(import.meta.dir, "../fixtures/peers");

let h: Harness | undefined;
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function tempLog(name: string): string {
  const path = join(tmpdir(), `${name}-${crypto.randomUUID()}`);
  cleanups.push(() => rmSync(path, { force: true }));
  return path;
}

function lines(path: string): unknown[] {
  try {
    return readFileSync(path, "utf8")
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
  } catch {
    return [];
  }
}

async function withRegistry(servers: Record<string, unknown>, env: Record<string, string> = {}) {
  h = await Harness.start({
    env,
    beforeStart: (project) =>
      writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: servers })),
  });
  return h;
}

async function errorOf(harness: Harness, expression: string) {
  return value(
    harness,
    `try:\n    ${expression}\n    out = None\nexcept Exception as e:\n    out = str(e)\nout`,
  );
}

async function httpPeer(script: string, env: Record<string, string> = {}): Promise<HttpPeer> {
  const peer = await launchHttpPeer(join(PEERS, script), { ...process.env, PEER_PORT: "0", ...env } as Record<
    string,
    string
  >);
  cleanups.push(() => peer.stop());
  return peer;
}

/**
 * Everything the broker promises, checked on one configured server named `peer`: results, the catalogue,
 * allowedTools (`denied` is a tool the peer has but the entry does not grant), the argument check, and
 * the journal of a completed call and of one whose outcome is unknown (`unknown`: a call that fails
 * after dispatch), with nothing sent twice.
 */
async function theSameRules(harness: Harness, unknown: string, earlierCalls = 0) {
  expect(await value(harness, "mcp.text(mcp.call('peer', 'echo', text='hello'))")).toBe("hello");
  expect(await value(harness, "[t['name'] for t in mcp.list_tools('peer')][0]")).toBe("echo");
  expect(await errorOf(harness, "mcp.call('peer', 'denied_by_policy')")).toContain(
    "Tool denied by broker allowedTools policy",
  );
  expect(await errorOf(harness, "mcp.call('peer', 'echo', text=5)")).toContain(
    "MCP arguments violate inputSchema",
  );
  expect(await errorOf(harness, unknown)).toContain("external outcome");
  const journal = await value(harness, "[(r['tool'], r['status']) for r in mcp.journal()]");
  const earlier = Array.from({ length: earlierCalls }, () => "completed");
  expect(journal.map((record: string[]) => record[1])).toEqual([...earlier, "completed", "outcome_unknown"]);
}

/** A stdio call cut off by its own deadline. */
const SLOW =
  "mcp.call('peer', 'slow_write', arguments={'path': '/nonexistent/never', 'seconds': 5}, timeout=0.2)";
/** An HTTP call the peer answers with a JSON-RPC error (the first `flaky` of a process). */
const FLAKY = "mcp.call('peer', 'flaky')";

const ALLOWED = ["echo", "two_blocks", "slow_write", "big", "flaky", "count"];

describe("stdio peers", () => {
  test("a 2026-07-28-only peer: started once, spoken to in 2026-07-28, same rules", async () => {
    const starts = tempLog("starts");
    const calls = tempLog("calls");
    const harness = await withRegistry({
      peer: {
        command: process.execPath,
        args: [join(PEERS, "stdio-peer-2026.ts")],
        env: { PEER_START_LOG: starts, PEER_CALL_LOG: calls },
        allowedTools: ALLOWED,
      },
    });
    await theSameRules(harness, SLOW);
    expect(lines(starts)).toHaveLength(1);
    // Each call reached the peer once: the denied and the invalid ones never left the broker.
    expect((lines(calls) as { tool: string }[]).map((call) => call.tool)).toEqual(["echo", "slow_write"]);
  });

  for (const before of ["silent", "exit"]) {
    test(`a legacy peer that is ${before} before initialize: started once, no probe wait`, async () => {
      const starts = tempLog("starts");
      const calls = tempLog("calls");
      const early = tempLog("early");
      const harness = await withRegistry({
        peer: {
          command: process.execPath,
          args: [join(PEERS, "stdio-peer.ts")],
          env: {
            PEER_START_LOG: starts,
            PEER_CALL_LOG: calls,
            PEER_EARLY_LOG: early,
            PEER_BEFORE_INITIALIZE: before,
          },
          allowedTools: ALLOWED,
        },
      });
      expect((await harness.run("mcp.call('peer', 'echo', text='x')")).success).toBe(true);
      // No request came before initialize: a probe would have been dropped (and waited on) or killed it.
      expect(lines(early)).toEqual([]);
      await theSameRules(harness, SLOW, 1);
      expect(lines(starts)).toHaveLength(1);
    });
  }
});

describe("HTTP peers", () => {
  test("a 2026-07-28-only HTTP peer with a bearer token: same rules, no initialize accepted", async () => {
    const peer = await httpPeer("http-peer-2026.ts", { PEER_TOKEN: "tok-2026-0123456789" });
    const harness = await withRegistry(
      {
        peer: {
          type: "http",
          url: peer.url.href,
          headers: { Authorization: "Bearer ${PEER_KEY}" },
          allowedTools: ALLOWED,
        },
      },
      { PEER_KEY: "tok-2026-0123456789" },
    );
    await theSameRules(harness, FLAKY);
    const counts = await value(harness, "mcp.call('peer', 'count')['structuredContent']");
    // The negotiation probed with server/discover and never fell back to initialize.
    expect(counts.initialize).toBe(0);
    // echo, flaky and count: the denied and the invalid calls never reached the peer.
    expect(counts.tools_call).toBe(3);
  });

  test("a legacy HTTP peer: negotiated down to 2025-11-25 with one initialize", async () => {
    const peer = await httpPeer("http-peer.ts", { PEER_TOKEN: "tok-legacy-0123456789" });
    const harness = await withRegistry(
      {
        peer: {
          type: "http",
          url: peer.url.href,
          headers: { Authorization: "Bearer ${PEER_KEY}" },
          allowedTools: ALLOWED,
        },
      },
      { PEER_KEY: "tok-legacy-0123456789" },
    );
    await theSameRules(harness, FLAKY);
    const counts = await value(harness, "mcp.call('peer', 'count')['structuredContent']");
    expect(counts).toMatchObject({ initialize: 1, tools_call: 3, sessions: 1 });
  });
});
