// The MCP broker end to end: cells call tools of real downstream servers (our fixture peers and a
// third-party server from npm) through the registry the user wrote. Each project has a broker of its
// own, so most tests write their registry into a session project of their own on the file's one server;
// a test that reads python_health's broker (the launch project's), counts the server's processes, kills
// it or needs a flag starts a server of its own.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { bundled } from "../fixtures/peers/bundle.ts";
import { Harness, pidsWithEnv, SessionClient, taggedPids, waitFor } from "../support/harness.ts";

const PEERS = resolve(import.meta.dir, "../fixtures/peers");
/** Bundled: most tests here start it, some several times. */
const STDIO_PEER = await bundled(join(PEERS, "stdio-peer.ts"));
afterAll(() => rmSync(dirname(STDIO_PEER), { recursive: true, force: true }));
const HTTP_PEER = join(PEERS, "http-peer.ts");
const MEMORY_SERVER = resolve(
  import.meta.dir,
  "../../node_modules/@modelcontextprotocol/server-memory/dist/index.js",
);

const stdioEntry = (env: Record<string, string> = {}, extra: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [STDIO_PEER],
  env,
  ...extra,
});

/** The HTTP peers' bearer token, which the registries name as ${WEB_TOKEN}. */
const WEB_TOKEN = "tok-leak-me-123";

/** The file's server, with the environment the registries' ${VAR} placeholders read. */
let server: Harness;
beforeAll(async () => {
  server = await Harness.start({ env: { REPL_TEST_SECRET: "s3cr3t", WEB_TOKEN } });
});
afterAll(async () => {
  await server?.close();
});

/** The test's session on the file's server. */
let session: SessionClient | undefined;
/** A server of the test's own. */
let h: Harness | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await session?.close();
  session = undefined;
  await h?.close();
  h = undefined;
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function writeRegistry(project: string, servers: Record<string, unknown>) {
  writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: servers }));
}

/** A session on the file's server whose project's registry names `servers`. */
async function withRegistry(servers: Record<string, unknown>) {
  session = await SessionClient.open(server, { beforeOpen: (project) => writeRegistry(project, servers) });
  return session;
}

/** A server of the test's own on a project whose registry names `servers` (python_health reports it). */
async function ownServer(servers: Record<string, unknown>) {
  h = await Harness.start({ beforeStart: (project) => writeRegistry(project, servers) });
  return h;
}

/**
 * mcp.journal() lists the records of every session this client opened on the server; a test reads
 * its own session's.
 */
const journalOf = (s: SessionClient) =>
  `[r for r in mcp.journal() if r['session_id'] == ${JSON.stringify(s.id)}]`;

/** A unique path for a fixture peer's log file, removed after the test. */
function tempLog(name: string): string {
  const path = join(tmpdir(), `${name}-${crypto.randomUUID()}`);
  cleanups.push(() => rmSync(path, { force: true }));
  return path;
}

/** Starts the HTTP fixture peer on a free port of 127.0.0.1. */
async function startHttpPeer(env: Record<string, string>) {
  const proc = Bun.spawn([process.execPath, HTTP_PEER, "0"], {
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "ignore",
  });
  const first = new TextDecoder().decode((await proc.stdout.getReader().read()).value);
  const port: number = JSON.parse(first.split("\n")[0] as string).port;
  return {
    port,
    async stop() {
      proc.kill();
      await proc.exited;
    },
  };
}

/** A session whose registry names that peer, with its bearer token taken from ${WEB_TOKEN}. */
function withHttpRegistry(port: number) {
  return withRegistry({
    web: {
      type: "http",
      url: `http://127.0.0.1:${port}/mcp`,
      headers: { Authorization: "Bearer ${WEB_TOKEN}" },
    },
  });
}

/** A server or session: where a cell runs. */
type Cells = Pick<SessionClient, "run">;

/** The message of the exception a Python expression raises (the cell itself must succeed). */
async function errorOf(harness: Cells, expression: string) {
  return value(
    harness,
    `try:\n    ${expression}\n    out = None\nexcept Exception as e:\n    out = str(e)\nout`,
  );
}

/** Runs a cell and returns its value, failing the test with the cell's error if it failed. */
async function value(harness: Cells, code: string, args: Record<string, unknown> = {}) {
  const result = await harness.run(code, args);
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
  return result.value;
}

describe("registry and grants", () => {
  test("nothing connects at startup, for health, servers, help or explain", async () => {
    const harness = await ownServer({ peer: stdioEntry() });
    const health = await harness.health();
    expect(health.broker).toMatchObject({
      configured_servers: 1,
      connected_transports: 0,
      configuration_error: null,
    });
    expect(await value(harness, "[mcp.servers(), mcp.help(), mcp.explain('peer')['status']]")).toEqual([
      ["peer"],
      ["peer"],
      "disconnected",
    ]);
    expect(harness.children().length).toBe(2); // guardian and worker only: no peer
    expect((await harness.health()).broker.connected_transports).toBe(0);
  });

  test("calls return the complete envelope; isError raises ToolError carrying it", async () => {
    const harness = await withRegistry({ peer: stdioEntry() });
    const echo = await value(
      harness,
      "r = mcp.call('peer', 'echo', arguments={'text': 'hi', 'n': 2})\n[mcp.text(r), r['structuredContent']]",
    );
    expect(echo).toEqual(["hi", { text: "hi", n: 2 }]);
    expect(
      await value(
        harness,
        "r = mcp.call('peer', 'two_blocks')\n[[b['text'] for b in r['content']], r['_meta']]",
      ),
    ).toEqual([["first", "second"], { fixture: "two_blocks" }]);
    const failed = await value(
      harness,
      "try:\n    mcp.call('peer', 'fail')\nexcept Exception as e:\n    out = [type(e).__name__, str(e), e.result['isError']]\nout",
    );
    expect(failed).toEqual(["ToolError", "MCP tool failed: it failed on purpose", true]);
    const journal = await value(
      harness,
      `[(r['tool'], r['status'], sorted(r)) for r in ${journalOf(harness)}]`,
    );
    expect(journal.map((row: unknown[]) => row.slice(0, 2))).toEqual([
      ["echo", "completed"],
      ["two_blocks", "completed"],
      ["fail", "tool_error"],
    ]);
    // Metadata only: no arguments, no results.
    expect(journal[0][2]).toEqual([
      "finished_ms",
      "id",
      "project",
      "run_id",
      "server",
      "session_id",
      "started_ms",
      "status",
      "tool",
    ]);
    expect(await value(harness, "r = mcp.call('peer', 'echo', text='kw')\nawait r\nmcp.text(await r)")).toBe(
      "kw",
    );
    const named = await value(
      harness,
      "mcp.call('peer', 'args_named', arguments={'timeout': 't', 'server': 's', 'tool': 'x', 'arguments': 'a'})['structuredContent']",
    );
    expect(named).toEqual({ timeout: "t", server: "s", tool: "x", arguments: "a" });
  });

  test("allowedTools is enforced before connecting, schemas before dispatch, timeouts before any request", async () => {
    const log = tempLog("peer-calls");
    const harness = await withRegistry({
      limited: stdioEntry({ PEER_CALL_LOG: log }, { allowedTools: ["echo"] }),
    });
    const denied = await errorOf(harness, "mcp.call('limited', 'fail')");
    expect(denied).toStartWith("Tool denied by broker allowedTools policy");
    const peers = () => pidsWithEnv(`PEER_CALL_LOG=${log}`);
    expect(peers()).toEqual([]); // refused without starting the peer
    const names = await value(harness, "[t['name'] for t in mcp.list_tools('limited')]");
    expect(names).toEqual(["echo"]);
    expect(peers()).toHaveLength(1); // listing started it: the check above can see one
    const invalid = await errorOf(harness, "mcp.call('limited', 'echo', arguments={'text': 1})");
    expect(invalid).toStartWith("MCP arguments violate inputSchema");
    const badTimeout = await value(
      harness,
      "try:\n    mcp.call('limited', 'echo', text='x', timeout=0)\nexcept ValueError as e:\n    out = 'ValueError'\nout",
    );
    expect(badTimeout).toBe("ValueError");
    expect(existsSync(log) ? readFileSync(log, "utf8") : "").toBe("");
    expect(await value(harness, `len(${journalOf(harness)})`)).toBe(0);
  });

  test("an invalid registry keeps Python up, fails broker calls closed, and refresh clears it", async () => {
    const harness = await ownServer({
      peer: { command: process.execPath, bogusField: "secret-value-123" },
    });
    const health = await harness.health();
    expect(health.broker.configuration_error).toContain('unknown field "bogusField"');
    expect(JSON.stringify(health)).not.toContain("secret-value-123");
    expect(await value(harness, "1 + 1")).toBe(2);
    const refused = await errorOf(harness, "mcp.servers()");
    expect(refused).toStartWith("MCP configuration error:");
    expect(await value(harness, "mcp.explain('peer')['status']")).toBe("config_invalid");
    writeFileSync(join(harness.project, ".mcp.json"), JSON.stringify({ mcpServers: { peer: stdioEntry() } }));
    expect(await value(harness, "mcp.refresh()['configuration_error'] is None")).toBe(true);
    expect(await value(harness, "mcp.servers()")).toEqual(["peer"]);
  });

  test("${VAR} placeholders come from the server's environment and are never echoed", async () => {
    // REPL_TEST_SECRET is in the file's server's environment; REPL_TEST_MISSING is not.
    const harness = await withRegistry({ peer: stdioEntry({ PEER_SECRET: "${REPL_TEST_SECRET}" }) });
    const who = await value(harness, "mcp.call('peer', 'whoami')['structuredContent']");
    expect(who.PEER_SECRET).toBe("s3cr3t");
    expect(who.REPL_MCP_NO_BRIDGE).toBe("1");
    expect(who.cwd).toBe(harness.project);
    writeFileSync(
      join(harness.project, ".mcp.json"),
      JSON.stringify({ mcpServers: { peer: stdioEntry({ PEER_SECRET: "${REPL_TEST_MISSING}" }) } }),
    );
    const error = await errorOf(harness, "mcp.refresh()");
    expect(error).toBe(
      "MCP configuration error: Required environment variable is missing; config values are omitted; repair registry then mcp.refresh()",
    );
  });

  test("self entries are skipped, disabled entries removed, and the broker can be switched off", async () => {
    const harness = await withRegistry({
      me: { command: "/usr/local/bin/repl-mcp" },
      off: stdioEntry({}, { disabled: true }),
      peer: stdioEntry(),
    });
    expect(await value(harness, "mcp.servers()")).toEqual(["peer"]);
    expect(await value(harness, "mcp.explain('off')['status']")).toBe("not_granted");
    expect(await value(harness, "mcp.explain('nobody')['status']")).toBe("server_absent");
    h = await Harness.start({ args: ["--mcp-scope", "none"] });
    expect((await h.health()).broker.enabled).toBe(false);
    expect(await value(h, "mcp.explain('peer')['status']")).toBe("broker_disabled");
  });
});

describe("transports", () => {
  test("entries that differ only in policy share one peer process", async () => {
    const harness = await ownServer({
      wide: stdioEntry(),
      narrow: stdioEntry({}, { allowedTools: ["whoami"] }),
    });
    const pids = await value(
      harness,
      "[mcp.call(name, 'whoami')['structuredContent']['pid'] for name in ['wide', 'narrow']]",
    );
    expect(pids[0]).toBe(pids[1]);
    expect((await harness.health()).broker.connected_transports).toBe(1);
    expect(await value(harness, "mcp.explain('wide', 'whoami')['status']")).toBe("ready");
    expect(await value(harness, "mcp.explain('narrow', 'echo')['status']")).toBe("not_granted");
    expect(await value(harness, "mcp.explain('wide', 'nope')['status']")).toBe("tool_missing");
  });

  test("a failed connect is remembered, explained, and retried after refresh", async () => {
    const harness = await withRegistry({ broken: { command: "/nonexistent/peer-binary" } });
    const first = await errorOf(harness, "mcp.call('broken', 'x')");
    expect(first).toStartWith("MCP connection failed");
    const second = await errorOf(harness, "mcp.call('broken', 'x')");
    expect(second).toStartWith("MCP connection recently failed");
    expect(await value(harness, "mcp.explain('broken')['status']")).toBe("disconnected");
    await value(harness, "mcp.refresh()");
    const third = await errorOf(harness, "mcp.call('broken', 'x')");
    expect(third).toStartWith("MCP connection failed");
  });

  test("a FIFO in place of the registry is refused without blocking", async () => {
    h = await Harness.start({
      beforeStart: (project) => {
        Bun.spawnSync(["mkfifo", join(project, ".mcp.json")]);
      },
    });
    const health = await h.health();
    expect(health.broker.configuration_error).toBe(
      "MCP registry must be a regular file; FIFOs and devices are unsupported",
    );
    expect(await value(h, "1 + 1")).toBe(2);
  });

  test("calls from a thread of their own are refused; asyncio.to_thread is allowed", async () => {
    const harness = await withRegistry({ peer: stdioEntry() });
    const fromThread = await value(
      harness,
      "import threading\nout = []\ndef go():\n    try:\n        mcp.servers()\n    except RuntimeError as e:\n        out.append(str(e))\nt = threading.Thread(target=go)\nt.start()\nt.join()\nout",
    );
    expect(fromThread).toEqual([
      "MCP calls must belong to their originating active cell; use mcp.acall for concurrency",
    ]);
    expect(await value(harness, "import asyncio\nawait asyncio.to_thread(mcp.servers)")).toEqual(["peer"]);
  });
});

describe("catalogues", () => {
  test("tool lists are followed across pages; broken pagination and oversize are explicit errors", async () => {
    const harness = await withRegistry({
      paged: stdioEntry({ PEER_MODE: "paged" }),
      loop: stdioEntry({ PEER_MODE: "cursor_loop" }),
      dup: stdioEntry({ PEER_MODE: "duplicates" }),
      huge: stdioEntry({ PEER_MODE: "huge_catalogue" }),
    });
    expect(await value(harness, "len(mcp.list_tools('paged'))")).toBe(9);
    const errors = await value(
      harness,
      "out = {}\nfor name in ['loop', 'dup', 'huge']:\n    try:\n        mcp.list_tools(name)\n        out[name] = 'listed'\n    except Exception as e:\n        out[name] = str(e)\nout",
    );
    expect(errors.loop).toContain("repeated a page cursor");
    expect(errors.dup).toContain("twice");
    expect(errors.huge).not.toBe("listed");
    expect(await value(harness, "mcp.help('paged', 'whoami')['name']")).toBe("whoami");
  });
});

describe("cancellation and effects", () => {
  test("a cancelled slow write never lands; the peer hears the cancel; the journal says outcome_unknown", async () => {
    const cancels = tempLog("peer-cancels");
    const calls = tempLog("peer-calls");
    const harness = await withRegistry({
      peer: stdioEntry({ PEER_CANCEL_LOG: cancels, PEER_CALL_LOG: calls }),
    });
    const marker = join(harness.dir, "written");
    await value(harness, "mcp.list_tools('peer')");
    const started = (
      await harness.call("python_start", {
        code: `mcp.call('peer', 'slow_write', arguments={'path': ${JSON.stringify(marker)}, 'seconds': 2})`,
      })
    ).structuredContent;
    await waitFor(() => existsSync(calls) && readFileSync(calls, "utf8").includes("slow_write"), {
      timeoutMs: 10_000,
      what: "the call to reach the peer",
    });
    await harness.call("python_cancel", { run_id: started.run_id });
    await waitFor(
      async () =>
        "success" in (await harness.call("python_run", { run_id: started.run_id })).structuredContent,
      {
        timeoutMs: 5_000,
        what: "the cancelled run to finish",
      },
    );
    await waitFor(() => existsSync(cancels) && readFileSync(cancels, "utf8").includes("slow_write"), {
      timeoutMs: 5_000,
      what: "the peer to receive notifications/cancelled",
    });
    await Bun.sleep(2_500);
    expect(existsSync(marker)).toBe(false);
    const journal = await value(harness, `[(r['tool'], r['status']) for r in ${journalOf(harness)}]`);
    expect(journal).toEqual([["slow_write", "outcome_unknown"]]);
    expect(await value(harness, "mcp.text(mcp.call('peer', 'echo', text='still alive'))")).toBe(
      "still alive",
    );
  }, 30_000);

  test("blocking calls, acalls and to_thread calls mix in one cell, before and after a call that gave up", async () => {
    // A blocking call on the main thread reads its own answer and hands the command pipe back to the
    // reader thread afterwards; the acalls after each one can only finish if that hand-back happened.
    const harness = await withRegistry({ peer: stdioEntry() });
    const result = await value(
      harness,
      [
        "import asyncio",
        "out = [mcp.text(mcp.call('peer', 'echo', text='a'))]",
        "try:\n    mcp.call('peer', 'slow_write', arguments={'path': '/nonexistent/x', 'seconds': 3}, timeout=0.2)\nexcept Exception as e:\n    out.append(type(e).__name__)",
        "out.append(mcp.text(await mcp.acall('peer', 'echo', text='b')))",
        "both = await asyncio.gather(asyncio.to_thread(mcp.call, 'peer', 'echo', text='c'), mcp.acall('peer', 'echo', text='d'))",
        "out += [mcp.text(r) for r in both]",
        "out.append(mcp.text(mcp.call('peer', 'echo', text='e')))",
        "out.append(mcp.text(await mcp.acall('peer', 'echo', text='f')))",
        "out",
      ].join("\n"),
    );
    expect(result).toEqual(["a", "ToolError", "b", "c", "d", "e", "f"]);
  });

  test("a SIGINT with no cancel frame stops a blocking call at once", async () => {
    // The main thread waits for the answer itself with SIGINT held back (so a frame is never cut in
    // half); the held-back signal must still end the wait, long before the tool would answer.
    const harness = await withRegistry({ peer: stdioEntry() });
    const result = await value(
      harness,
      [
        "import os, signal, threading",
        "t = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))",
        "t.start()",
        "try:\n    mcp.call('peer', 'slow_write', arguments={'path': '/nonexistent/x', 'seconds': 600})\n    out = 'answered'\nexcept KeyboardInterrupt:\n    out = 'interrupted'",
        "t.join()",
        "out",
      ].join("\n"),
    );
    expect(result).toBe("interrupted");
  }, 30_000);

  test("many acalls run at once; cancelling one leaves the others and the transport", async () => {
    const harness = await withRegistry({ peer: stdioEntry() });
    const result = await value(
      harness,
      [
        "import asyncio",
        "slow = asyncio.ensure_future(mcp.acall('peer', 'slow_write', arguments={'path': '/nonexistent/x', 'seconds': 5}))",
        "fast = [mcp.acall('peer', 'echo', text=str(i)) for i in range(10)]",
        "done = await asyncio.gather(*fast)",
        "slow.cancel()",
        "try:\n    await slow\nexcept asyncio.CancelledError:\n    pass",
        "[[mcp.text(r) for r in done], mcp.text(await mcp.acall('peer', 'echo', text='after'))]",
      ].join("\n"),
    );
    expect(result).toEqual([["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"], "after"]);
  });

  test("a result over the delivery budget is a known outcome, journaled completed, not retried", async () => {
    const log = tempLog("peer-calls");
    const harness = await withRegistry({ peer: stdioEntry({ PEER_CALL_LOG: log }) });
    const error = await errorOf(harness, "mcp.call('peer', 'big', arguments={'bytes': 950000})");
    expect(error).toContain("MCP returned a known outcome for call");
    expect(await value(harness, `[r['status'] for r in ${journalOf(harness)}]`)).toEqual(["completed"]);
    expect(readFileSync(log, "utf8").trim().split("\n")).toHaveLength(1);
  });

  test("server SIGKILL while a peer is stuck in native code: the peer is gone within 5 s", async () => {
    const harness = await ownServer({ peer: stdioEntry() });
    await harness.call("python_start", {
      code: "mcp.call('peer', 'block_native', arguments={'seconds': 60})",
    });
    await waitFor(() => harness.children().length >= 4, { timeoutMs: 10_000, what: "the peer to start" });
    const children = harness.children();
    process.kill(harness.serverPid, "SIGKILL");
    await waitFor(() => children.every((pid) => !taggedPids(harness.tag).includes(pid)), {
      timeoutMs: 5_000,
      what: "worker and peer to die",
    });
  }, 30_000);
});

describe("HTTP peers and a third-party server", () => {
  test("bearer token from ${VAR}; a JSON-RPC error is reported once and the transport is kept", async () => {
    const peer = await startHttpPeer({ PEER_TOKEN: WEB_TOKEN });
    try {
      const harness = await withHttpRegistry(peer.port);
      expect(await value(harness, "mcp.text(mcp.call('web', 'echo', text='over http'))")).toBe("over http");
      const flaky = await errorOf(harness, "mcp.call('web', 'flaky')");
      expect(flaky).toStartWith("MCP transport or protocol error");
      expect(await value(harness, "mcp.text(mcp.call('web', 'flaky'))")).toBe("ok");
      expect((await value(harness, "mcp.call('web', 'count')['structuredContent']")).initialize).toBe(1);
    } finally {
      await peer.stop();
    }
  });

  test("a peer's error body (which may echo credentials) never reaches the cell", async () => {
    const peer = await startHttpPeer({ PEER_TOKEN: WEB_TOKEN, PEER_LEAKY_ERRORS: "1" });
    try {
      const harness = await withHttpRegistry(peer.port);
      const listed = await errorOf(harness, "mcp.list_tools('web')");
      const called = await errorOf(harness, "mcp.call('web', 'echo', text='x')");
      expect(listed).toStartWith("MCP transport or protocol error");
      expect(called).toStartWith("MCP transport or protocol error");
      expect(listed + called).not.toContain(WEB_TOKEN);
    } finally {
      await peer.stop();
    }
  });

  test("brokers a real third-party server (server-memory from npm)", async () => {
    const memoryFile = join(tmpdir(), `repl-mcp-memory-${crypto.randomUUID()}.json`);
    cleanups.push(() => rmSync(memoryFile, { force: true }));
    const harness = await withRegistry({
      memory: {
        command: "node",
        args: [MEMORY_SERVER],
        env: { MEMORY_FILE_PATH: memoryFile },
      },
    });
    const names = await value(harness, "sorted(t['name'] for t in mcp.list_tools('memory'))");
    expect(names).toContain("create_entities");
    const graph = await value(
      harness,
      [
        "mcp.call('memory', 'create_entities', arguments={'entities': [{'name': 'repl', 'entityType': 'tool', 'observations': ['works']}]})",
        "r = mcp.call('memory', 'read_graph')",
        "[e['name'] for e in (r.get('structuredContent') or __import__('json').loads(mcp.text(r)))['entities']]",
      ].join("\n"),
    );
    expect(graph).toContain("repl");
  });
});

describe("per-project brokers", () => {
  test("a session on another project uses that project's registry", async () => {
    // Its own server: the other project's broker must leave the launch project's (the default session's)
    // alone.
    const harness = await ownServer({ peer: stdioEntry() });
    const other = join(harness.dir, "other");
    mkdirSync(other);
    writeFileSync(join(other, ".mcp.json"), JSON.stringify({ mcpServers: { elsewhere: stdioEntry() } }));
    const opened = (await harness.call("python_session_open", { name: "other", project: other }))
      .structuredContent;
    expect(await value(harness, "mcp.servers()", { session_id: opened.session_id })).toEqual(["elsewhere"]);
    expect(await value(harness, "mcp.servers()")).toEqual(["peer"]);
    // The last session of a project closing shuts its broker, and with it the project's peers.
    const peerPid = await value(harness, "mcp.call('elsewhere', 'whoami')['structuredContent']['pid']", {
      session_id: opened.session_id,
    });
    expect(harness.children()).toContain(peerPid);
    await harness.call("python_session_close", { session_id: opened.session_id });
    await waitFor(() => !harness.children().includes(peerPid), {
      timeoutMs: 5_000,
      what: "the peer to stop",
    });
  });
});
