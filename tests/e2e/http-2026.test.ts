// MCP 2026-07-28 over Streamable HTTP: stateless POSTs without Mcp-Session-Id, the revision's headers,
// tasks, progress, and isolation that no longer rests on a transport session. A 2026-07-28 client is
// known by its bearer token; a legacy MCP session is a client of its own; neither can see, run in,
// cancel, read artifacts of or list the other's sessions, runs, artifacts, tasks or journal records.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { CreateTaskResultV2Schema, GetTaskResultV2Schema } from "@modelcontextprotocol/ext-tasks/core/v2";
import { waitFor } from "../support/harness.ts";
import { type HttpClient, HttpServer } from "../support/http.ts";

const STDIO_PEER = resolve(import.meta.dir, "../fixtures/peers/stdio-peer.ts");
const A5 = "Session not found or closed; open a new session";

let server: HttpServer;
let modern: HttpClient;
let legacy: HttpClient;
beforeAll(async () => {
  server = await HttpServer.start([], {}, (project) =>
    writeFileSync(
      join(project, ".mcp.json"),
      JSON.stringify({ mcpServers: { peer: { command: process.execPath, args: [STDIO_PEER] } } }),
    ),
  );
  modern = await server.connect(server.auth, { era: "modern" });
  legacy = await server.connect(server.auth, { era: "legacy" });
});
afterAll(async () => {
  await server.stop();
});

/** One raw 2026-07-28 request with the revision's headers, answered as JSON or as an event stream. */
async function raw(method: string, params: Record<string, unknown>, capabilities: object = {}) {
  const name = (params.name ?? params.uri ?? params.taskId) as string | undefined;
  const envelope = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": { name: "raw", version: "0" },
    "io.modelcontextprotocol/clientCapabilities": capabilities,
  };
  const body = {
    jsonrpc: "2.0",
    id: 1,
    method,
    params: { ...params, _meta: { ...envelope, ...(params._meta as object) } },
  };
  const response = await server.post(JSON.stringify(body), {
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": method,
    ...(name === undefined ? {} : { "mcp-name": name }),
  });
  const text = await response.text();
  const messages = response.headers.get("content-type")?.includes("text/event-stream")
    ? text
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => JSON.parse(line.slice(6)))
    : [JSON.parse(text)];
  return { response, messages, reply: messages.at(-1) };
}

describe("stateless requests", () => {
  test("no Mcp-Session-Id, and a session id of another era's client is unknown in either direction", async () => {
    const { response } = await raw("tools/list", {});
    expect(response.status).toBe(200);
    expect(response.headers.get("mcp-session-id")).toBeNull();
    const mine = await modern.sessionId();
    const theirs = await legacy.sessionId();
    expect(mine).not.toBe(theirs);
    const foreign = await modern.call("execute_python", { code: "1", session_id: theirs }).catch((e) => e);
    expect(String(foreign.message)).toContain(A5);
    const back = await legacy.call("execute_python", { code: "1", session_id: mine }).catch((e) => e);
    expect(String(back.message)).toContain(A5);
  });

  test("a second 2026-07-28 client with the same token is the same client", async () => {
    const other = await server.connect(server.auth, { era: "modern" });
    expect(await other.sessionId()).toBe(await modern.sessionId());
    expect((await modern.run("shared = 'yes'")).success).toBe(true);
    expect((await other.run("shared")).value).toBe("yes");
  });

  test("headers must agree with the body", async () => {
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/list",
      params: {
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {},
        },
      },
    });
    const response = await server.post(body, {
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: number } }).error.code).toBe(-32020);
  });

  test("an unknown method is 404 with -32601; no token is 401", async () => {
    const { response, reply } = await raw("ping", {});
    expect(response.status).toBe(404);
    expect(reply.error.code).toBe(-32601);
    const refused = await fetch(server.url, {
      method: "POST",
      body: "{}",
      headers: { "content-type": "application/json" },
    });
    expect(refused.status).toBe(401);
  });
});

describe("nothing of the other client", () => {
  test("sessions, runs, artifacts, resources, tasks and journal records stay with their client", async () => {
    // The legacy client: a session of its own with an artifact, a long run, and a brokered call.
    const opened = await legacy.call("python_session_open", { name: "theirs", project: server.project });
    const theirs = opened.structuredContent.session_id as string;
    const made = await legacy.call("execute_python", {
      code: "ref = artifact('secret of theirs')\nmcp.call('peer', 'echo', text='theirs')\nref['id']",
      session_id: theirs,
    });
    const artifactId = made.structuredContent.value as string;
    const started = await legacy.call("python_start", {
      code: "import time\ntime.sleep(30)",
      session_id: theirs,
    });
    const runId = started.structuredContent.run_id as string;

    // The 2026-07-28 client sees none of it.
    const list = (await modern.call("python_session_list")).structuredContent.sessions as {
      session_id: string;
    }[];
    expect(list.map((session) => session.session_id)).not.toContain(theirs);
    const health = (await modern.health()).sessions.sessions as { session_id: string }[];
    expect(health.map((session) => session.session_id)).not.toContain(theirs);
    for (const [tool, args] of [
      ["python_run", { run_id: runId, session_id: theirs }],
      ["python_cancel", { run_id: runId, session_id: theirs }],
      ["artifact_read", { id: artifactId, session_id: theirs }],
      ["python_session_inspect", { session_id: theirs }],
    ] as const) {
      const error = await modern.call(tool, args).catch((e) => e);
      expect(String(error.message)).toContain(A5);
    }
    const own = await modern.call("artifact_read", { id: artifactId, session_id: await modern.sessionId() });
    expect(own.structuredContent.error).toContain("Artifact unknown");
    const resources = await modern.client.listResources();
    expect(resources.resources.map((resource) => resource.name)).not.toContain(artifactId);
    expect((await raw("tasks/get", { taskId: runId })).reply.error.code).toBe(-32602);
    const close = await modern.call("python_session_close", { session_id: theirs });
    expect(close.structuredContent.error).toContain("not found");
    const journal = await modern.run("[r['session_id'] for r in mcp.journal()]");
    expect(journal.value).not.toContain(theirs);

    // And the run it could not cancel is still running for its owner.
    const run = await legacy.call("python_run", { run_id: runId, session_id: theirs });
    expect(run.structuredContent.status).toBe("running");
    await legacy.call("python_cancel", { run_id: runId, session_id: theirs });
    // The legacy client's journal has its call; the modern client's own call is its own.
    await modern.run("mcp.call('peer', 'echo', text='mine')");
    const theirJournal = await legacy.call("execute_python", {
      code: "[r['session_id'] for r in mcp.journal()]",
      session_id: theirs,
    });
    expect(theirJournal.structuredContent.value).toEqual([theirs]);
    expect((await modern.run("[r['session_id'] for r in mcp.journal()]")).value).toEqual([
      await modern.sessionId(),
    ]);
  });
});

describe("tasks and progress over HTTP", () => {
  const TASKS = { extensions: { "io.modelcontextprotocol/tasks": {} } };

  test("a long cell is a task; tasks/get in a later request finds it and carries the result", async () => {
    const sessionId = await modern.sessionId();
    const { reply } = await raw(
      "tools/call",
      {
        name: "execute_python",
        arguments: { code: "import time\ntime.sleep(2)\n'over http'", session_id: sessionId },
      },
      TASKS,
    );
    expect(CreateTaskResultV2Schema.safeParse(reply.result).success).toBe(true);
    const taskId = reply.result.taskId as string;
    let done: Record<string, any> = {};
    await waitFor(
      async () => {
        done = (await raw("tasks/get", { taskId })).reply.result;
        return done.status !== "working";
      },
      { timeoutMs: 20_000, what: "the task to finish" },
    );
    expect(GetTaskResultV2Schema.safeParse(done).success).toBe(true);
    expect(done.status).toBe("completed");
    expect(done.result.structuredContent.value).toBe("over http");
  });

  test("progress arrives on the request's event stream, before its result", async () => {
    const sessionId = await modern.sessionId();
    const { messages } = await raw("tools/call", {
      name: "execute_python",
      arguments: {
        code: "import time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.4)",
        session_id: sessionId,
      },
      _meta: { progressToken: "h1" },
    });
    const progress = messages.filter((m) => m.method === "notifications/progress");
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(messages.at(-1).result.structuredContent.success).toBe(true);
  });
});
