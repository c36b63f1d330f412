// Process ownership: whatever happens to the server, no guardian, worker or grandchild survives it.
import { afterEach, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { BINARY, Harness, STUCK_IN_C, taggedPids, tempDir, waitFor } from "../support/harness.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const INIT = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
};

/** Starts the binary with raw pipes, for tests that must control stdin and signals themselves. */
function rawServer() {
  const dir = tempDir();
  const tag = crypto.randomUUID();
  const proc = Bun.spawn([BINARY], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: dir,
      XDG_CACHE_HOME: join(dir, ".cache"),
      REPL_MCP_TEST_TAG: tag,
    },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines: any[] = [];
  void (async () => {
    let buffer = "";
    for await (const chunk of proc.stdout) {
      buffer += new TextDecoder().decode(chunk);
      let nl = buffer.indexOf("\n");
      while (nl !== -1) {
        lines.push(JSON.parse(buffer.slice(0, nl)));
        buffer = buffer.slice(nl + 1);
        nl = buffer.indexOf("\n");
      }
    }
  })();
  const send = (message: unknown) => {
    proc.stdin.write(`${JSON.stringify(message)}\n`);
    proc.stdin.flush();
  };
  const response = (id: number) =>
    waitFor(() => lines.some((line) => line.id === id), { timeoutMs: 20_000, what: `response ${id}` }).then(
      () => lines.find((line) => line.id === id),
    );
  const startCell = (id: number, code: string) => {
    send({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "execute_python", arguments: { code } },
    });
  };
  cleanups.push(() => {
    proc.kill("SIGKILL");
    for (const pid of taggedPids(tag)) process.kill(pid, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  return { proc, tag, send, response, startCell, dir };
}

async function initialized() {
  const server = rawServer();
  server.send(INIT);
  await server.response(1);
  server.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  return server;
}

const others = (tag: string, serverPid: number) => taggedPids(tag).filter((pid) => pid !== serverPid);

test("server SIGKILL while the worker is stuck in C code: guardian and worker are gone within 5 s", async () => {
  const server = await initialized();
  server.startCell(2, STUCK_IN_C);
  await waitFor(() => others(server.tag, server.proc.pid).length === 2, {
    timeoutMs: 10_000,
    what: "worker start",
  });
  const children = others(server.tag, server.proc.pid);
  server.proc.kill("SIGKILL");
  const took = await waitFor(() => children.every((pid) => !taggedPids(server.tag).includes(pid)), {
    timeoutMs: 5_000,
    what: "guardian and worker to die",
  });
  expect(took).toBeLessThan(5_000);
});

test("stdin EOF ends the server with status 0 and stops its worker", async () => {
  const server = await initialized();
  server.startCell(2, "40 + 2");
  const answer = await server.response(2);
  expect(answer.result.structuredContent.value).toBe(42);
  expect(others(server.tag, server.proc.pid).length).toBe(2);
  server.proc.stdin.end();
  expect(await server.proc.exited).toBe(0);
  await waitFor(() => taggedPids(server.tag).length === 0, { timeoutMs: 5_000, what: "children to exit" });
});

test("SIGTERM with stdin still open ends the server promptly, worker included", async () => {
  const server = await initialized();
  server.startCell(2, "import time\ntime.sleep(60)");
  await waitFor(() => others(server.tag, server.proc.pid).length === 2, {
    timeoutMs: 10_000,
    what: "worker start",
  });
  const started = performance.now();
  server.proc.kill("SIGTERM");
  await server.proc.exited;
  expect(performance.now() - started).toBeLessThan(5_000);
  await waitFor(() => taggedPids(server.tag).length === 0, { timeoutMs: 2_000, what: "worker to exit" });
});

test("a client cancelling an in-flight execute_python interrupts the cell", async () => {
  const h = await Harness.start();
  try {
    const controller = new AbortController();
    const pending = h.call(
      "execute_python",
      { code: "import time\ntime.sleep(30)" },
      { signal: controller.signal },
    );
    await waitFor(() => h.children().length === 2, { timeoutMs: 10_000, what: "worker start" });
    await Bun.sleep(200);
    controller.abort();
    await expect(pending).rejects.toThrow();
    const health = await waitFor(async () => (await h.health()).server.active_run === null, {
      timeoutMs: 5_000,
      what: "the cell to stop",
    });
    expect(health).toBeLessThan(5_000);
    expect((await h.run("1")).generation).toBe(1);
  } finally {
    await h.close();
  }
});
