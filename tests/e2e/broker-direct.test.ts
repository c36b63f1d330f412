// The tools/call requests the broker writes on a legacy stdio peer's pipes itself (broker/direct-calls.ts)
// keep the rules the SDK client's requests kept: a JSON-RPC error or a result that is not a tools/call
// result is a protocol error in our own words, journaled outcome_unknown, with the transport kept; a call
// past its deadline tells the peer which request it gave up, and the peer's late answer reaches nobody.
// The peer (fixtures/peers/rogue-peer.py) logs every message it receives.
import { afterEach, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Harness, cellValue as value, waitFor } from "../support/harness.ts";

const ROGUE = resolve(import.meta.dir, "../fixtures/peers/rogue-peer.py");

let h: Harness | undefined;
const logs: string[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const log of logs.splice(0)) rmSync(log, { force: true });
});

interface Received {
  method: string | null;
  id: string | number | null;
  requestId: string | number | null;
}

/** A server whose registry has one rogue peer in `mode`, and the file the peer logs its input to. */
async function withRogue(mode: string): Promise<{ harness: Harness; received: () => Received[] }> {
  const log = join(tmpdir(), `rogue-log-${crypto.randomUUID()}`);
  logs.push(log);
  h = await Harness.start({
    beforeStart: (project) => {
      const rogue = { command: "python3", args: [ROGUE], env: { ROGUE_MODE: mode, ROGUE_LOG: log } };
      writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: { rogue } }));
    },
  });
  const received = () =>
    existsSync(log)
      ? readFileSync(log, "utf8")
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line) as Received)
      : [];
  return { harness: h, received };
}

/** Two calls (connected first, so a short deadline is the call's alone), their texts and journal. */
const TRY_CALL = (timeout: number) =>
  [
    "mcp.list_tools('rogue')",
    "try:",
    `    first = mcp.call('rogue', 'poke', timeout=${timeout})['content'][0]['text']`,
    "except Exception as e:",
    "    first = 'error: ' + str(e)",
    "second = mcp.call('rogue', 'poke')['content'][0]['text']",
    "[first, second, [r['status'] for r in mcp.journal()]]",
  ].join("\n");

test("a JSON-RPC error is reported in our words, journaled outcome_unknown, and the peer stays connected", async () => {
  const { harness, received } = await withRogue("rpcerror");
  const [first, second, statuses] = (await value(harness, TRY_CALL(10))) as [string, string, string[]];
  expect(first).toContain("MCP transport or protocol error; external outcome may be unknown");
  expect(first).not.toContain("rogue-secret");
  expect(second).toBe("ok");
  expect(statuses).toEqual(["outcome_unknown", "completed"]);
  // One handshake: the second call went to the same process over the same transport.
  expect(received().filter((m) => m.method === "initialize")).toHaveLength(1);
});

test("a result that is not a tools/call result is a protocol error, journaled outcome_unknown", async () => {
  const { harness } = await withRogue("badresult");
  const out = (await value(
    harness,
    "try:\n    mcp.call('rogue', 'poke')\n    out = 'no error'\nexcept Exception as e:\n    out = str(e)\n[out, [r['status'] for r in mcp.journal()]]",
  )) as [string, string[]];
  expect(out[0]).toContain("MCP transport or protocol error");
  expect(out[1]).toEqual(["outcome_unknown"]);
});

test("past its deadline a call cancels that request at the peer, and the late answer reaches nobody", async () => {
  const { harness, received } = await withRogue("slowfirst");
  const [first, second, statuses] = (await value(harness, TRY_CALL(0.1))) as [string, string, string[]];
  expect(first).toContain("MCP deadline exceeded; external outcome is unknown, request was not retried");
  // The peer answered the first request "late" after the second was sent; the second gets its own answer.
  expect(second).toBe("ok");
  expect(statuses).toEqual(["outcome_unknown", "completed"]);
  await waitFor(() => received().some((m) => m.method === "notifications/cancelled"), {
    timeoutMs: 10_000,
    what: "the peer to read the cancellation",
  });
  const calls = received().filter((m) => m.method === "tools/call");
  const cancel = received().find((m) => m.method === "notifications/cancelled");
  expect(calls).toHaveLength(2);
  expect(cancel?.requestId).toBe(calls[0]?.id as string);
  expect(calls[0]?.id).not.toBe(calls[1]?.id as string);
});
