// The fault matrix: each test injects one fault and then asserts what every fault must leave intact —
// the server still answers (or exited as the contract says), the tool reported the failure honestly
// (never a success with missing data), stdout carried only JSON-RPC, and no process of ours survives.
// runner: waiting lane
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pidAlive, STUCK_IN_C, tempDir, waitFor } from "../support/harness.ts";
import { FaultServer, type FaultServerOptions } from "./server.ts";

const PEERS = resolve(import.meta.dir, "../fixtures/peers");
const ROGUE_STDIO = join(PEERS, "rogue-peer.py");
const ROGUE_HTTP = join(PEERS, "rogue-http.ts");
const STDIO_PEER = join(PEERS, "stdio-peer.ts");

let current: FaultServer | undefined;
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  current?.destroy();
  current = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function start(options: FaultServerOptions = {}): Promise<FaultServer> {
  current = await FaultServer.start(options);
  return current;
}

/** The common ending of a fault: serving, honest stdout, and every process gone once the client leaves. */
async function survives(server: FaultServer): Promise<void> {
  await server.assertServing();
  await endsClean(server);
}

async function endsClean(server: FaultServer): Promise<void> {
  await server.finish();
  expect(server.invalidLines()).toEqual([]);
}

/** A cell result that must be an honest failure whose error matches `pattern`. */
function failed(result: Record<string, any>, pattern: RegExp): void {
  expect(result.success).toBe(false);
  expect(String(result.error)).toMatch(pattern);
}

/** Python that writes `payload` (a Python bytes expression) straight into the worker's frame pipe. */
const intoFramePipe = (payload: string) =>
  `import os, sys\nfd = sys.modules['__main__'].PROTOCOL_FD\nos.write(fd, ${payload})\nimport time\ntime.sleep(30)`;

describe("worker faults", () => {
  test("SIGKILL of the worker during a cell", async () => {
    const s = await start();
    await s.run("x = 1");
    failed(await s.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"), /exit|kill|crash|signal/i);
    const after = await s.run("'x' in globals()");
    expect(after).toMatchObject({ success: true, value: false, state_reset: true });
    await survives(s);
  });

  test("os._exit in a cell", async () => {
    const s = await start();
    failed(await s.run("import os\nos._exit(7)"), /exit|crash|7/i);
    await survives(s);
  });

  test("a segfault in C code (ctypes)", async () => {
    const s = await start();
    failed(await s.run("import ctypes\nctypes.string_at(0)"), /exit|signal|crash|SIGSEGV|segmentation/i);
    await survives(s);
  });

  test("a C-level hang that ignores SIGINT is killed at its deadline", async () => {
    const s = await start();
    const result = await s.run(STUCK_IN_C, { timeout: 1 });
    failed(result, /time|timed out|deadline/i);
    expect(result.state).toBe("cleared");
    await survives(s);
  });

  test("1 GB written to OS fd 1 is bounded", async () => {
    const s = await start();
    const result = await s.run(
      "import os\nb = b'a' * (1 << 20)\nfor _ in range(1024):\n    os.write(1, b)\n'done'",
    );
    expect(result).toMatchObject({ success: true, value: "done" });
    expect(Buffer.byteLength(result.stderr)).toBeLessThanOrEqual(50_000);
    expect(result.truncated.stderr).toBe(true);
    await survives(s);
  });

  test("1 GB written to OS fd 2 is bounded", async () => {
    const s = await start();
    const result = await s.run(
      "import os\nb = b'b' * (1 << 20)\nfor _ in range(1024):\n    os.write(2, b)\n'done'",
    );
    expect(result).toMatchObject({ success: true, value: "done" });
    expect(Buffer.byteLength(result.stderr)).toBeLessThanOrEqual(50_000);
    await survives(s);
  });

  test("200 MB of print() is bounded", async () => {
    const s = await start();
    const result = await s.run("line = 'p' * 999\nfor _ in range(200_000):\n    print(line)\n'done'");
    expect(result).toMatchObject({ success: true, value: "done" });
    expect(Buffer.byteLength(result.stdout)).toBeLessThanOrEqual(50_000);
    expect(result.truncated.stdout).toBe(true);
    await survives(s);
  });

  test("a memory bomb past the RSS budget kills the worker, not the server", async () => {
    const s = await start({ args: ["--max-memory-mib", "256"] });
    const result = await s.run("blocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))");
    failed(result, /memory|RSS|MiB/i);
    expect(result.state).toBe("cleared");
    await survives(s);
  });

  test("a fork bomb of detached process groups is reaped on reset and on exit", async () => {
    const s = await start();
    const spawned = await s.run(
      "import subprocess\nps = [subprocess.Popen(['sleep', '300'], start_new_session=True) for _ in range(20)]\nlen(ps)",
    );
    expect(spawned.value).toBe(20);
    expect(s.children().length).toBeGreaterThanOrEqual(22);
    const reset = await s.run("1", { reset: true });
    expect(reset).toMatchObject({ success: true, state_reset: true });
    await waitFor(() => s.children().length <= 2, { timeoutMs: 10_000, what: "the detached groups to die" });
    await s.run(
      "import subprocess\nps = [subprocess.Popen(['sleep', '300'], start_new_session=True) for _ in range(10)]",
    );
    await survives(s);
  });

  test("grandchildren inside a detached group die with the group when the server exits", async () => {
    const s = await start();
    const result = await s.run(
      "import subprocess\np = subprocess.Popen(['sh', '-c', 'sleep 300 & sleep 300 & sleep 300 & wait'], start_new_session=True)\np.pid",
    );
    expect(result.success).toBe(true);
    await waitFor(() => s.children().length >= 6, { timeoutMs: 10_000, what: "the grandchildren" });
    await survives(s);
  });

  test("the worker closes its own frame pipe: a crash at once, not when the cell ends", async () => {
    const s = await start();
    const pid = (await s.run("import os\nos.getpid()")).value as number;
    // The cell would sleep for ten minutes; the call's own deadline is far shorter, so only a server
    // that notices the closed pipe at once (not at the worker's exit) answers in time.
    const call = await s.call(
      "execute_python",
      {
        code: "import os, sys, time\nos.close(sys.modules['__main__'].PROTOCOL_FD)\ntime.sleep(600)",
        timeout: 900,
      },
      30_000,
    );
    const result = call.structuredContent as Record<string, any>;
    failed(result, /Python worker crashed; variables cleared/);
    expect(result.state).toBe("cleared");
    expect(pidAlive(pid)).toBe(false);
    expect(s.children()).toEqual([]);
    expect(await s.run("1 + 1")).toMatchObject({ success: true, value: 2, state_reset: true });
    await survives(s);
  });

  test("the worker writes garbage into its frame pipe", async () => {
    const s = await start();
    failed(await s.run(intoFramePipe("b'this is not a frame\\n'")), /protocol|frame|invalid|crash|worker/i);
    await survives(s);
  });

  test("the worker writes an over-long frame", async () => {
    const s = await start();
    failed(
      await s.run(intoFramePipe('b\'{"type": "output", "text": "\' + b\'z\' * (2 << 20) + b\'"}\\n\'')),
      /protocol|frame|limit|crash|worker|MiB|bytes/i,
    );
    await survives(s);
  });
});

/** A wrapper interpreter that sleeps before becoming python3, so a fault can land mid-start. */
function slowPython(dir: string, seconds: number): { python: string; started: string } {
  const python = join(dir, "slow-python");
  const started = join(dir, "slow-python-started");
  writeFileSync(python, `#!/bin/sh\necho "$$" >> '${started}'\nsleep ${seconds}\nexec python3 "$@"\n`);
  chmodSync(python, 0o755);
  return { python, started };
}

/** How many times the slow interpreter has been started. */
const starts = (marker: string) =>
  existsSync(marker) ? readFileSync(marker, "utf8").split("\n").length - 1 : 0;

describe("server signals at every stage", () => {
  for (const signal of ["SIGKILL", "SIGTERM"] as const) {
    test(`${signal} while an opened session's interpreter probe runs`, async () => {
      const s = await start();
      const { python, started } = slowPython(s.dir, 30);
      const opening = s
        .call("python_session_open", { name: "p", project: s.project, python })
        .catch(() => "gone");
      await waitFor(() => starts(started) >= 1, { timeoutMs: 10_000, what: "the probe to start" });
      s.proc.kill(signal);
      await opening;
      await endsClean(s);
    });

    test(`${signal} while the worker starts`, async () => {
      const s = await start();
      const { python, started } = slowPython(s.dir, 2);
      const opened = await s.call("python_session_open", { name: "w", project: s.project, python });
      expect(opened.isError).toBeFalsy();
      const cell = s.run("1", { session_id: opened.structuredContent.session_id }).catch(() => "gone");
      await waitFor(() => starts(started) >= 2, { timeoutMs: 10_000, what: "the worker start" });
      s.proc.kill(signal);
      await cell;
      await endsClean(s);
    });

    test(`${signal} during a cell stuck in C`, async () => {
      const s = await start();
      await s.run("1");
      const cell = s.run(STUCK_IN_C).catch(() => "gone");
      await Bun.sleep(300);
      s.proc.kill(signal);
      await cell;
      await endsClean(s);
    });

    test(`${signal} during a bridge call to a hanging stdio peer`, async () => {
      const s = await start({
        registry: { rogue: { command: "python3", args: [ROGUE_STDIO], env: { ROGUE_MODE: "hang" } } },
      });
      const cell = s.run("mcp.call('rogue', 'poke', timeout=60)").catch(() => "gone");
      await waitFor(() => s.children().length >= 4, { timeoutMs: 15_000, what: "the peer to start" });
      await Bun.sleep(200);
      s.proc.kill(signal);
      await cell;
      await endsClean(s);
    });
  }

  for (const signal of ["SIGKILL", "SIGTERM"] as const) {
    test(`${signal} during an artifact upload`, async () => {
      const s = await start();
      const upload = s
        .run("for i in range(200):\n    artifact_delete(artifact(b'u' * (8 << 20))['id'])")
        .catch(() => "gone");
      await waitFor(() => s.children().length >= 2, { timeoutMs: 10_000, what: "the worker" });
      await Bun.sleep(400);
      s.proc.kill(signal);
      await upload;
      await endsClean(s);
    });
  }

  test("SIGKILL in the middle of a journaled call: the next server says outcome_unknown", async () => {
    const registry = { rogue: { command: "python3", args: [ROGUE_STDIO], env: { ROGUE_MODE: "hang" } } };
    const dir = tempDir("repl-mcp-journal-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const journal = join(dir, "journal.json");
    const s = await start({ registry, args: ["--journal", journal] });
    const cell = s.run("mcp.call('rogue', 'poke', timeout=60)").catch(() => "gone");
    await waitFor(() => existsSync(journal) && readFileSync(journal, "utf8").includes("dispatched"), {
      timeoutMs: 15_000,
      what: "the dispatched record on disk",
    });
    s.proc.kill("SIGKILL");
    await cell;
    await endsClean(s);
    const again = await start({ registry, args: ["--journal", journal] });
    const records = await again.run("[(r['tool'], r['status']) for r in mcp.journal()]");
    expect(records.value).toEqual([["poke", "outcome_unknown"]]);
    await survives(again);
  });

  test("SIGTERM with an idle live worker exits promptly", async () => {
    const s = await start();
    await s.run("x = 1");
    s.proc.kill("SIGTERM");
    await waitFor(() => s.exited(), { timeoutMs: 10_000, what: "the server to exit" });
    await endsClean(s);
  });
});

/** The cell that calls `server`'s tool and returns the exception's text, or "no error". */
const callCatching = (server: string, timeout: number) =>
  `try:\n    mcp.call('${server}', 'poke', timeout=${timeout})\n    out = 'no error'\nexcept Exception as e:\n    out = type(e).__name__ + ': ' + str(e)\nout`;

describe("stdio peer faults", () => {
  const rogue = (mode: string) => ({
    registry: { rogue: { command: "python3", args: [ROGUE_STDIO], env: { ROGUE_MODE: mode } } },
  });

  test("a peer that crashes mid-call", async () => {
    const s = await start(rogue("crash"));
    const out = await s.run(callCatching("rogue", 20));
    expect(out.success).toBe(true);
    expect(out.value).not.toBe("no error");
    expect(out.value).toMatch(/transport or protocol error|closed|exited/i);
    await survives(s);
  });

  test("a peer that never answers a call hits the call's deadline", async () => {
    const s = await start(rogue("hang"));
    const out = await s.run(callCatching("rogue", 2));
    expect(out.value).toMatch(/deadline exceeded/i);
    await survives(s);
  });

  test("a peer that writes a line that is not JSON-RPC", async () => {
    const s = await start(rogue("garbage"));
    const out = await s.run(callCatching("rogue", 20));
    expect(out.value).not.toBe("no error");
    expect(out.value).toMatch(/invalid|not JSON|transport or protocol error/i);
    await survives(s);
  });

  test("a peer that writes a line over 1 MiB", async () => {
    const s = await start(rogue("longline"));
    const out = await s.run(callCatching("rogue", 20));
    expect(out.value).not.toBe("no error");
    expect(out.value).toMatch(/limit|MiB|bytes|transport or protocol error/i);
    await survives(s);
  });

  test("a peer that never answers initialize", async () => {
    const s = await start(rogue("noinit"));
    const out = await s.run(callCatching("rogue", 2));
    expect(out.value).not.toBe("no error");
    expect(out.value).toMatch(/deadline|time|connect|initialize/i);
    await survives(s);
  });

  test("the registry is swapped while a call runs", async () => {
    const s = await start({
      registry: { peer: { command: process.execPath, args: [STDIO_PEER] } },
    });
    const slow = s.run("mcp.text(mcp.call('peer', 'slow_write', arguments={'ms': 1500}))");
    await Bun.sleep(300);
    writeFileSync(
      join(s.project, ".mcp.json"),
      JSON.stringify({ mcpServers: { other: { command: process.execPath, args: [STDIO_PEER] } } }),
    );
    const result = await slow;
    // Either the call finished against the entry it started with, or it failed honestly.
    if (result.success) expect(result.value).toBeTypeOf("string");
    else expect(String(result.error)).not.toBe("");
    const refreshed = await s.run("mcp.refresh()\nmcp.servers()");
    expect(refreshed.value).toEqual(["other"]);
    await survives(s);
  });
});

describe("HTTP peer faults", () => {
  async function rogueHttp(mode: string) {
    const proc = Bun.spawn([process.execPath, ROGUE_HTTP], {
      env: { ...process.env, ROGUE_MODE: mode },
      stdout: "pipe",
      stderr: "ignore",
    });
    const first = new TextDecoder().decode((await proc.stdout.getReader().read()).value);
    const port: number = JSON.parse(first.split("\n")[0] as string).port;
    cleanups.push(async () => {
      proc.kill();
      await proc.exited;
    });
    return { registry: { web: { type: "http", url: `http://127.0.0.1:${port}/mcp` } } };
  }

  test("a body that stops half way hits the call's deadline", async () => {
    const s = await start(await rogueHttp("hang_body"));
    const out = await s.run(callCatching("web", 2));
    expect(out.value).toMatch(/deadline exceeded/i);
    await survives(s);
  });

  test("HTTP 500 on a call", async () => {
    const s = await start(await rogueHttp("status500"));
    const out = await s.run(callCatching("web", 20));
    expect(out.value).not.toBe("no error");
    expect(out.value).toMatch(/500|transport or protocol error/i);
    await survives(s);
  });

  test("a redirect is refused", async () => {
    const s = await start(await rogueHttp("redirect"));
    const out = await s.run(callCatching("web", 20));
    expect(out.value).not.toBe("no error");
    expect(out.value).toMatch(/redirect/i);
    await survives(s);
  });

  test("a 4 MiB body is refused, not buffered", async () => {
    const s = await start(await rogueHttp("huge"));
    const out = await s.run(callCatching("web", 20));
    expect(out.value).not.toBe("no error");
    expect(out.value).toMatch(/limit|MiB|bytes|transport or protocol error/i);
    await survives(s);
  });
});

describe("client faults", () => {
  test("the client disconnects in the middle of a call", async () => {
    const s = await start();
    void s.run("import time\ntime.sleep(30)").catch(() => {});
    await waitFor(() => s.children().length >= 2, { timeoutMs: 10_000, what: "the worker" });
    await Bun.sleep(300);
    s.endInput();
    await waitFor(() => s.exited(), { timeoutMs: 15_000, what: "the server to exit on stdin EOF" });
    await endsClean(s);
  });

  test("malformed and oversized lines are answered with id null and nothing else changes", async () => {
    const s = await start();
    await s.run("kept = 'still here'");
    const before = s.lines.length;
    s.writeLine("this is not json");
    s.writeLine(JSON.stringify({ hello: "world" }));
    s.writeLine(new Uint8Array([0xff, 0xfe, 0x7b, 0x7d]));
    s.writeLine(
      `{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{"pad":"${"x".repeat(1_100_000)}"}}`,
    );
    await waitFor(() => s.lines.length - before >= 4, { timeoutMs: 10_000, what: "four error answers" });
    const answers = s.lines.slice(before).map((line) => JSON.parse(line));
    for (const answer of answers) {
      expect(answer.id).toBeNull();
      expect([-32700, -32600]).toContain(answer.error.code);
    }
    expect(answers.some((answer) => /1048576|1,048,576|1 MiB/.test(answer.error.message))).toBe(true);
    expect((await s.run("kept")).value).toBe("still here");
    await survives(s);
  });
});
