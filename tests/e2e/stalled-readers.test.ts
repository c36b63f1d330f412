// Issue 12, defect 7: output toward a reader that stopped reading is bounded, and a reader stalled past
// the deadline (30 s) is treated like one that closed. Our MCP client: the server stops as on EOF,
// leaving no process. A stdio peer: it is stopped and the calls waiting on it fail with a clear error.
// Both cases run side by side, as each has to wait out the same deadline, and the file's tests run
// concurrently: each has a server of its own, and most of their time is spent waiting on deadlines.
import { afterAll, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Harness, taggedPids, waitFor } from "../support/harness.ts";
import { RawServer } from "../support/raw.ts";

const STDIO_PEER = resolve(import.meta.dir, "../fixtures/peers/stdio-peer.ts");

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
});

async function clientStopsReading(): Promise<void> {
  const s = await RawServer.start();
  cleanups.push(() => s.close());
  expect((await s.run("1 + 1")).value).toBe(2);
  expect(s.children().length).toBe(2); // guardian and worker
  s.pauseReading();
  // Hundreds of catalogue answers (tens of KB each): far more than the socket and our bounded queue hold.
  for (let i = 0; i < 300; i++) s.send({ jsonrpc: "2.0", id: 500 + i, method: "tools/list", params: {} });
  await waitFor(() => !s.alive, { timeoutMs: 60_000, what: "the server to give up on its stalled client" });
  expect(s.stderr).toContain("read none of our output");
  await waitFor(() => taggedPids(s.tag).length === 0, { timeoutMs: 10_000, what: "its processes to exit" });
}

async function peerStopsReading(): Promise<void> {
  const h = await Harness.start({
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({ mcpServers: { peer: { command: process.execPath, args: [STDIO_PEER] } } }),
      ),
  });
  cleanups.push(() => h.close());
  // block_native freezes the peer's whole process, so it reads nothing while 1.2 MB of requests wait:
  // more than the socket between us holds.
  const errors = await h.run(
    [
      "import asyncio",
      "blocker = asyncio.ensure_future(mcp.acall('peer', 'block_native', seconds=50, timeout=120))",
      "await asyncio.sleep(1)",
      "big = [mcp.acall('peer', 'echo', text=str(i) * 200_000, timeout=120) for i in range(6)]",
      "outcomes = await asyncio.gather(blocker, *big, return_exceptions=True)",
      "[str(o) if isinstance(o, Exception) else 'no error' for o in outcomes]",
    ].join("\n"),
  );
  expect(errors.success).toBe(true);
  expect(errors.value).toHaveLength(7);
  for (const error of errors.value) {
    expect(error).toContain("MCP peer read none of its input for 30 s and was stopped");
  }
  // The stopped peer is gone, and the next call starts a fresh one.
  expect((await h.run("mcp.call('peer', 'echo', text='again')['content'][0]['text']")).value).toBe("again");
}

test.concurrent("a client and a stdio peer that stop reading are treated as gone after the deadline", async () => {
  await Promise.all([clientStopsReading(), peerStopsReading()]);
}, 120_000);

/** Resident memory of one process, in MiB. */
function rssMib(pid: number): number {
  const kib = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kib) / 1024;
}

// Issue 20, defect 5: before, 3,000 pipelined polls of a chatty run grew the server by 650 MiB within 12 s
// while the client read nothing; every answer waited in memory for the stalled pipe.
test.concurrent("a client that stops reading while requests pile up costs a few MiB, and loses no answer", async () => {
  const s = await RawServer.start();
  cleanups.push(() => s.close());
  const started = await s.call("python_start", {
    code: "import sys, time\nfor i in range(600):\n    print('x' * 1000, i, flush=True); print('e' * 1000, file=sys.stderr, flush=True); time.sleep(0.05)",
  });
  const runId = started.result.structuredContent.run_id;
  await waitFor(
    async () =>
      ((await s.call("python_run", { run_id: runId })).result.structuredContent.stdout ?? "").length > 40_000,
    { timeoutMs: 20_000, what: "the run's live output to fill" },
  );
  const before = rssMib(s.proc.pid);
  s.pauseReading();
  const first = 700_000;
  const polls = 3_000;
  for (let i = 0; i < polls; i++) {
    s.send({
      jsonrpc: "2.0",
      id: first + i,
      method: "tools/call",
      params: { name: "python_run", arguments: { run_id: runId } },
    });
  }
  // Watch the server for the 12 s the defect needed, then let the client read again.
  let peak = before;
  const until = Date.now() + 12_000;
  while (Date.now() < until) {
    peak = Math.max(peak, rssMib(s.proc.pid));
    await Bun.sleep(200);
  }
  s.resumeReading();
  await waitFor(() => s.messages.filter((m) => m.id >= first && m.id < first + polls).length === polls, {
    timeoutMs: 60_000,
    what: "every poll to be answered once the client reads",
  });
  expect(peak - before).toBeLessThan(64);
  await s.call("python_cancel", { run_id: runId });
}, 120_000);

// A cancellation is never held back behind requests that wait for a stalled client: the cell it cancels
// stops now, not once the client reads again.
test.concurrent("a cancellation reaches its cell at once while requests wait for a client that stopped reading", async () => {
  const s = await RawServer.start();
  cleanups.push(() => s.close());
  const marker = join(s.project, "late");
  s.send({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: {
      name: "execute_python",
      arguments: { code: `import time\ntime.sleep(4)\nopen(${JSON.stringify(marker)}, 'w').write('late')` },
    },
  });
  await Bun.sleep(1_000);
  s.pauseReading();
  for (let i = 0; i < 300; i++) s.send({ jsonrpc: "2.0", id: 500 + i, method: "tools/list", params: {} });
  s.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1, reason: "test" } });
  await Bun.sleep(5_000);
  expect(existsSync(marker)).toBe(false);
  s.resumeReading();
  await waitFor(() => s.messages.filter((m) => m.id >= 500 && m.id < 800).length === 300, {
    timeoutMs: 30_000,
    what: "the waiting requests to be answered once the client reads",
  });
}, 60_000);

// Issue 26, defect 3: the answers to lines that are not requests we serve (a bad line gets an `id: null`
// error, a request claiming an unknown revision -32022) were written past the output bound: a client that
// wrote such lines and never read grew the server by one waiting write per line until the stall deadline.
// They now wait their turn like every other answer, so the server stops reading instead. 60,000 pairs
// would have grown the old server by about 270 MiB, far past the 64 MiB this test allows.
test.concurrent("a client that writes bad lines and never reads stays bounded (before: +900 MiB), and every line is answered", async () => {
  const s = await RawServer.start({ args: ["--log-level", "error"] });
  cleanups.push(() => s.close());
  expect((await s.run("1 + 1")).value).toBe(2);
  const before = rssMib(s.proc.pid);
  s.pauseReading();
  const pairs = 60_000;
  const claim = { "io.modelcontextprotocol/protocolVersion": "2099-01-01" };
  const refusedRequest = (id: number) =>
    JSON.stringify({ jsonrpc: "2.0", id, method: "tools/list", params: { _meta: claim } });
  const first = 2_000_000;
  const batch: string[] = [];
  for (let i = 0; i < pairs; i++) {
    batch.push("not json", refusedRequest(first + i));
    if (batch.length >= 2_000) s.write(`${batch.splice(0).join("\n")}\n`);
  }
  if (batch.length > 0) s.write(`${batch.join("\n")}\n`);
  let peak = before;
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    peak = Math.max(peak, rssMib(s.proc.pid));
    await Bun.sleep(200);
  }
  s.resumeReading();
  await waitFor(() => s.messages.filter((m) => m.id >= first && m.id < first + pairs).length === pairs, {
    timeoutMs: 60_000,
    what: "every refused request to be answered once the client reads",
  });
  expect(s.messages.filter((m) => m.id === null && m.error?.code === -32700)).toHaveLength(pairs);
  expect(s.messages.find((m) => m.id === first)?.error?.code).toBe(-32022);
  expect(peak - before).toBeLessThan(64);
  expect((await s.run("2 + 2")).value).toBe(4);
}, 120_000);
