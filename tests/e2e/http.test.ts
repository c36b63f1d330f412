// --transport http against the real binary: the SDK's Streamable HTTP client for what works, raw requests
// for what must be refused, and the process table for what must be cleaned up.
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, readdirSync, readlinkSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { BINARY, pidAlive, tempDir, waitFor } from "../support/harness.ts";
import { HttpServer, INITIALIZE, post } from "../support/http.ts";
import { LegacyTasks } from "../support/legacy-tasks.ts";

const TOKEN = "s3cret-token-0123456789abcdef";
let servers: HttpServer[] = [];

async function serve(args: string[] = [], env: Record<string, string> = {}) {
  const server = await HttpServer.start(args, env);
  servers.push(server);
  return server;
}

afterEach(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  servers = [];
});

function tokenFile(mode: number, content = `${TOKEN}\n`): string {
  const path = join(tempDir(), "token");
  writeFileSync(path, content);
  chmodSync(path, mode);
  return path;
}

/** Artifacts are unlinked files only the server's descriptors hold: count those descriptors. */
function artifactFiles(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).filter((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`).includes(".repl-mcp-artifact-");
    } catch {
      return false;
    }
  }).length;
}

/** node:http lets a test send any Host header, which fetch would replace. */
function rawStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "POST", headers }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end(INITIALIZE);
  });
}

describe("serving", () => {
  test("the URL line last on stderr, nothing on stdout; tools, a cell and state between cells", async () => {
    const server = await serve();
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = await server.connect();
    const { tools } = await client.client.listTools();
    expect(tools.map((tool) => tool.name)).toContain("execute_python");
    expect((await client.run("x = 20\nprint('hi')")).stdout).toBe("hi\n");
    const result = await client.run("x * 2 + 2");
    expect(result.success).toBe(true);
    expect(result.return_value).toContain("42");
    expect(server.stdout).toBe("");
    expect(server.stderr.trim().split("\n").at(-1)).toBe(`repl-mcp: serving MCP over HTTP at ${server.url}`);
    expect(server.stderr).not.toMatch(/warn|error/i);
  });

  test("a long run is started, polled while it prints, and finishes", async () => {
    const server = await serve();
    const client = await server.connect();
    const started = (
      await client.call("python_start", {
        code: "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\n'done'",
      })
    ).structuredContent;
    expect(started.status).toBe("starting");
    let final: Record<string, any> = {};
    await waitFor(
      async () => {
        final = (await client.call("python_run", { run_id: started.run_id })).structuredContent;
        return final.success !== undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: "the run to finish" },
    );
    expect(final.success).toBe(true);
    expect(final.stdout).toBe("0\n1\n2\n");
    expect(final.return_value).toContain("done");
  });

  test("progress notifications reach the client while a cell runs, over the event stream", async () => {
    const server = await serve();
    const client = await server.connect();
    const seen: number[] = [];
    const result = (await client.client.callTool(
      {
        name: "execute_python",
        arguments: {
          code: "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.8)\n'ok'",
        },
      },
      { timeout: 60_000, onprogress: (progress) => seen.push(progress.progress) },
    )) as { structuredContent: Record<string, any> };
    expect(result.structuredContent.return_value).toContain("ok");
    expect(seen.length).toBeGreaterThanOrEqual(1);
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1] as number);
  });

  test("a cell run as an MCP task is the client's own: another client cannot see or fetch it", async () => {
    const server = await serve();
    const [a, b] = await Promise.all([server.connect(), server.connect()]);
    const [tasksA, tasksB] = [new LegacyTasks(a.client), new LegacyTasks(b.client)];
    const { taskId } = await tasksA.create("execute_python", { code: "import time; time.sleep(0.5); 6 * 7" });
    expect(taskId).not.toBe("");
    const done = await tasksA.result(taskId);
    expect(done.structuredContent.return_value).toContain("42");
    expect((await tasksB.list()).tasks).toEqual([]);
    const foreign = await tasksB.get(taskId).then(
      () => "found",
      (e) => String(e.message),
    );
    const unknown = await tasksB.get(crypto.randomUUID()).then(
      () => "found",
      (e) => String(e.message).replace(/[0-9a-f-]{36}/, "<id>"),
    );
    expect(foreign.replace(taskId, "<id>")).toBe(unknown);
  });

  test("two clients are isolated: own default session, own sessions, others' ids are unknown", async () => {
    const server = await serve();
    const [a, b] = await Promise.all([server.connect(), server.connect()]);
    await Promise.all([a.run("who = 'a'"), b.run("who = 'b'")]);
    expect((await a.run("who")).return_value).toContain('"a"');
    expect((await b.run("who")).return_value).toContain('"b"');

    const healthA = (await a.call("python_health")).structuredContent;
    const healthB = (await b.call("python_health")).structuredContent;
    expect(healthA.server.session_id).not.toBe(healthB.server.session_id);

    const opened = (await a.call("python_session_open", { name: "mine", project: "." })).structuredContent;
    const listB = (await b.call("python_session_list")).structuredContent;
    expect(listB.sessions.map((s: { session_id: string }) => s.session_id)).toEqual([
      healthB.server.session_id,
    ]);

    const unknown = crypto.randomUUID();
    for (const [tool, extra] of [
      ["execute_python", { code: "1" }],
      ["python_run", {}],
      ["python_session_inspect", {}],
    ] as const) {
      const foreign = await b.client
        .callTool({ name: tool, arguments: { ...extra, session_id: opened.session_id } })
        .catch((e) => e.message);
      const missing = await b.client
        .callTool({ name: tool, arguments: { ...extra, session_id: unknown } })
        .catch((e) => e.message);
      expect(foreign).toBe(missing);
      expect(String(foreign)).toContain("Session not found");
    }
    for (const id of [opened.session_id, healthA.server.session_id]) {
      const closing = (await b.call("python_session_close", { session_id: id })).structuredContent;
      const closingUnknown = (await b.call("python_session_close", { session_id: unknown }))
        .structuredContent;
      expect(closing).toEqual(closingUnknown);
    }
    writeFileSync(join(server.project, "a.txt"), "a's bytes");
    const artifact = (
      await a.call("artifact_create", {
        session_id: healthA.server.session_id,
        path: "a.txt",
        format: "text",
      })
    ).structuredContent;
    const read = (id: string) =>
      b.call("artifact_read", { session_id: healthB.server.session_id, id }).then((r) => r.structuredContent);
    const foreignRead = await read(artifact.id);
    const unknownRead = await read(crypto.randomUUID());
    expect(foreignRead.error).toBeDefined();
    expect({ ...foreignRead, id: undefined }).toEqual({ ...unknownRead, id: undefined });
    const uriOf = (session: string, id: string) => `repl-mcp://artifacts/${session}/${id}`;
    const listed = async (client: typeof a) =>
      (await client.client.listResources()).resources.map((r) => r.uri);
    expect(await listed(a)).toContain(uriOf(healthA.server.session_id, artifact.id));
    expect(await listed(b)).toEqual([]);
    const readUri = (uri: string) =>
      b.client.readResource({ uri }).then(
        () => "read",
        (e) => String(e.message),
      );
    const foreignUri = await readUri(uriOf(healthA.server.session_id, artifact.id));
    expect(foreignUri).not.toBe("read");
    expect(foreignUri).toBe(await readUri(uriOf(crypto.randomUUID(), crypto.randomUUID())));
    expect(foreignUri).toBe(await readUri(uriOf(healthB.server.session_id, crypto.randomUUID())));
    // A's session survived B's attempts.
    expect((await a.run("who", { session_id: opened.session_id })).error).toContain("NameError");
  });
});

describe("ending MCP sessions", () => {
  test("clients that initialize and vanish never lock out others; one that ran Python keeps its slot", async () => {
    const server = await serve();
    const worker = await server.connect();
    await worker.run("kept = True");
    // A client that only stored an artifact has something to lose too.
    const keeper = await server.connect();
    writeFileSync(join(server.project, "kept.txt"), "kept bytes");
    const keeperSession = (await keeper.call("python_health")).structuredContent.server.session_id;
    const stored = (
      await keeper.call("artifact_create", { session_id: keeperSession, path: "kept.txt", format: "text" })
    ).structuredContent;
    // More abandoned initializations than the process has session slots (32).
    for (let i = 0; i < 40; i++) expect((await server.post(INITIALIZE)).status).toBe(200);
    const late = await server.connect();
    expect((await late.run("'in'")).return_value).toContain("in");
    expect((await worker.run("kept")).return_value).toBe("true");
    const read = await keeper.call("artifact_read", { session_id: keeperSession, id: stored.id });
    expect(read.structuredContent.content).toBe("kept bytes");
  });

  test("DELETE closes the client's Python sessions and kills their workers", async () => {
    const server = await serve();
    const keep = await server.connect();
    const gone = await server.connect();
    const pidOf = async (client: typeof keep, args: Record<string, unknown> = {}) =>
      Number((await client.run("import os; os.getpid()", args)).return_value);
    const kept = await pidOf(keep);
    const opened = (await gone.call("python_session_open", { name: "extra", project: "." }))
      .structuredContent;
    const doomed = [await pidOf(gone), await pidOf(gone, { session_id: opened.session_id })];
    writeFileSync(join(server.project, "data.txt"), "some bytes");
    const made = await gone.call("artifact_create", {
      session_id: opened.session_id,
      path: "data.txt",
      format: "text",
    });
    expect(made.isError).toBeFalsy();
    expect(artifactFiles(server.proc.pid)).toBe(1);
    expect(doomed.every(pidAlive)).toBe(true);
    await gone.transport.terminateSession();
    await waitFor(() => !doomed.some(pidAlive), {
      timeoutMs: 10_000,
      what: "the ended client's workers to stop",
    });
    expect(artifactFiles(server.proc.pid)).toBe(0);
    expect(pidAlive(kept)).toBe(true);
    expect(await pidOf(keep)).toBe(kept);
    const stale = await server.post(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }), {
      "mcp-session-id": gone.transport.sessionId ?? "none",
    });
    expect(stale.status).toBe(404);
  });

  test("an idle MCP session is ended after --idle-timeout-s and its workers stop", async () => {
    const server = await serve(["--idle-timeout-s", "1"]);
    const client = await server.connect();
    await client.run("1");
    expect(server.children().length).toBeGreaterThan(0);
    await waitFor(() => server.children().length === 0, {
      timeoutMs: 15_000,
      what: "the idle session's workers to stop",
    });
    const stale = await server.post(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }), {
      "mcp-session-id": client.transport.sessionId ?? "none",
    });
    expect(stale.status).toBe(404);
  });

  test("a running cell keeps its MCP session alive past the idle timeout, and its idle time starts after it", async () => {
    const server = await serve(["--idle-timeout-s", "2"]);
    const client = await server.connect();
    const result = await client.run("import time\nkept = 'still here'\ntime.sleep(4)\nkept");
    expect(result.return_value).toContain("still here");
    // The last request was 4 s ago, but the run ended just now: the session (and `kept`) must still be
    // there after a pause shorter than the timeout but longer than the 0.5 s between two idle checks.
    await Bun.sleep(800);
    expect((await client.run("kept")).return_value).toContain("still here");
  });

  test("SIGTERM ends every session and leaves no process", async () => {
    const server = await serve();
    const [a, b] = await Promise.all([server.connect(), server.connect()]);
    await Promise.all([a.run("1"), b.run("1")]);
    expect(server.children().length).toBeGreaterThanOrEqual(2);
    server.proc.kill("SIGTERM");
    expect(await server.exitCode()).toBe(0);
    await waitFor(() => server.children().length === 0, { timeoutMs: 10_000, what: "workers to exit" });
  });

  test("SIGKILL of the server leaves no worker behind", async () => {
    const server = await serve();
    const client = await server.connect();
    const pid = Number((await client.run("import os; os.getpid()")).return_value);
    expect(pidAlive(pid)).toBe(true);
    server.proc.kill("SIGKILL");
    await server.exitCode();
    await waitFor(() => !pidAlive(pid) && server.children().length === 0, {
      timeoutMs: 10_000,
      what: "the worker to die",
    });
  });
});

describe("refusals", () => {
  test("with a token: missing or wrong → 401 before MCP; the right one works", async () => {
    const server = await serve(["--auth-token-file", tokenFile(0o600)]);
    const attempts: Record<string, string>[] = [
      {},
      { authorization: "Bearer wrong-token-0123456789" },
      { authorization: TOKEN },
    ];
    for (const headers of attempts) {
      const response = await post(server.url, INITIALIZE, headers);
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toContain("Bearer");
      expect(response.headers.get("mcp-session-id")).toBeNull();
      expect(((await response.json()) as any).error.message).toContain("bearer token");
    }
    const client = await server.connect({ authorization: `Bearer ${TOKEN}` });
    expect((await client.run("1 + 1")).return_value).toContain("2");
  });

  test("the token can come from REPL_MCP_HTTP_TOKEN", async () => {
    const server = await serve([], { REPL_MCP_HTTP_TOKEN: TOKEN });
    expect((await post(server.url, INITIALIZE)).status).toBe(401);
    const client = await server.connect({ authorization: `Bearer ${TOKEN}` });
    expect((await client.call("python_health")).isError).toBeFalsy();
  });

  test("a foreign Host or Origin → 403; --allowed-origin adds one", async () => {
    const server = await serve(["--allowed-origin", "https://app.example"]);
    const base = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...server.auth,
    };
    const port = new URL(server.url).port;
    expect(await rawStatus(server.url, { ...base, host: `evil.example:${port}` })).toBe(403);
    expect(await rawStatus(server.url, { ...base, host: `localhost:${port}` })).toBe(200);
    expect((await post(server.url, INITIALIZE, { origin: "https://evil.example" })).status).toBe(403);
    expect((await post(server.url, INITIALIZE, { origin: "null" })).status).toBe(403);
    expect((await server.post(INITIALIZE, { origin: "https://app.example" })).status).toBe(200);
    expect((await server.post(INITIALIZE, { origin: "http://localhost:6274" })).status).toBe(200);
  });

  test("a body over the 1 MiB message limit → 413, the server keeps serving", async () => {
    const server = await serve();
    const client = await server.connect();
    const big = JSON.stringify({
      jsonrpc: "2.0",
      id: 9,
      method: "ping",
      params: { pad: "x".repeat(1_100_000) },
    });
    const response = await server.post(big, { "mcp-session-id": client.transport.sessionId as string });
    expect(response.status).toBe(413);
    expect(((await response.json()) as any).error.message).toContain("1048576");
    expect((await client.run("'alive'")).return_value).toContain("alive");
  });

  test("refuses to start without a safe token", async () => {
    const cases: [string[], Record<string, string>, string][] = [
      [["--host", "0.0.0.0"], {}, "not a loopback address"],
      [["--auth-token-file", tokenFile(0o644)], {}, "chmod 600"],
      [["--auth-token-file", tokenFile(0o600, "short\n")], {}, "shorter than 16"],
      [["--auth-token-file", tokenFile(0o600)], { REPL_MCP_HTTP_TOKEN: TOKEN }, "not both"],
      [["--auth-token-file", "/nonexistent/token"], {}, "does not exist"],
    ];
    for (const [args, env, message] of cases) {
      const server = HttpServer.spawn(args, env);
      servers.push(server);
      expect(await server.exitCode()).toBe(2);
      await waitFor(() => server.stderr.includes(message), { what: `"${message}" on stderr` });
      expect(server.url).toBe("");
    }
  });

  test("a port already in use is a start-up refusal, not a hang", async () => {
    const first = await serve();
    const port = new URL(first.url).port;
    const second = HttpServer.spawn(["--port", port]);
    servers.push(second);
    expect(await second.exitCode()).toBe(2);
    await waitFor(() => second.stderr.includes(`cannot listen on 127.0.0.1 port ${port}`), {
      what: "the refusal",
    });
    expect(second.url).toBe("");
  });

  test("usage mistakes in the HTTP flags are refused before anything starts", async () => {
    const cases: [string[], string][] = [
      [["--port", "8765"], "--port only applies with --transport http"],
      [["--transport", "http", "--port", "70000"], "--port takes a TCP port"],
      [["--transport", "http", "--idle-timeout-s", "0"], "--idle-timeout-s takes whole seconds"],
      [["--transport", "http", "--host", ""], "--host needs a value"],
    ];
    for (const [args, message] of cases) {
      const proc = Bun.spawn([BINARY, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
      const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
      expect(code).toBe(2);
      expect(stderr).toContain(message);
    }
  });
});

// Issue 20, defect 6: the journal is server-wide, but a client lists only its own sessions' records.
test("mcp.journal() over HTTP lists the calling client's records only", async () => {
  const peer = join(import.meta.dir, "../fixtures/peers/stdio-peer.ts");
  const server = await HttpServer.start([], {}, (project) =>
    writeFileSync(
      join(project, ".mcp.json"),
      JSON.stringify({ mcpServers: { peer: { command: process.execPath, args: [peer] } } }),
    ),
  );
  servers.push(server);
  const [a, b] = await Promise.all([server.connect(), server.connect()]);
  expect((await a.run("mcp.text(mcp.call('peer', 'echo', text='a'))")).value).toBe("a");
  expect((await b.run("mcp.text(mcp.call('peer', 'echo', text='b'))")).value).toBe("b");
  const sessions = await Promise.all([a.sessionId(), b.sessionId()]);
  expect((await a.run("[r['session_id'] for r in mcp.journal()]")).value).toEqual([sessions[0]]);
  expect((await b.run("[r['session_id'] for r in mcp.journal()]")).value).toEqual([sessions[1]]);
  // python_health counts the same records.
  expect((await a.health()).broker.journal).toBe(1);
  expect((await b.health()).broker.journal).toBe(1);
});
