// Kept sessions (docs/sessions.md, "Keeping a session"): a kept session's worker outlives its server
// (stdin closed, SIGTERM, kill -9), parked by its guardian, and the next server of the same project
// adopts it with its namespace, its generation and the result of a cell that ran across the exit. Every
// test ends with `repl-mcp sessions stop --all` and checks that nothing of it is left running.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, Harness, pidAlive, taggedPids, waitFor } from "../support/harness.ts";
import { run } from "../support/run.ts";
import { EventReader, viewerOf } from "../support/viewer.ts";

const KEEP = ["--keep-sessions", "1h"];
type Start = (args: string[], after?: Harness) => Promise<Harness>;

/**
 * A test on servers of its own (a later one shares the first's home and project). Tests run
 * concurrently: most of their time is spent waiting for cells and expiries. Each ends with
 * `repl-mcp sessions stop --all` and a check that none of its processes is left.
 */
function keptTest(name: string, body: (start: Start) => Promise<void>, timeoutMs = 60_000): void {
  test.concurrent(
    name,
    async () => {
      const servers: Harness[] = [];
      const start: Start = async (args, after) => {
        const server = await Harness.start({ args, after });
        servers.push(server);
        return server;
      };
      try {
        await body(start);
      } finally {
        await cleanUp(servers);
      }
    },
    timeoutMs,
  );
}

async function cleanUp(servers: Harness[]): Promise<void> {
  for (const server of servers) await server.client.close().catch(() => {});
  const first = servers[0];
  if (first) await sessions(first, ["stop", "--all"]);
  await waitFor(() => servers.every((server) => taggedPids(server.tag).length === 0), {
    timeoutMs: 10_000,
    what: "every process of the test to be gone",
  });
  for (const server of [...servers].reverse()) rmSync(server.dir, { recursive: true, force: true });
}

/** `repl-mcp sessions ...` as the user of `server`'s home. */
async function sessions(server: Harness, args: string[]) {
  return await run([BINARY, "sessions", ...args], { env: server.env(), timeoutMs: 30_000 });
}

async function keptList(server: Harness): Promise<any[]> {
  const listed = await sessions(server, ["--json"]);
  expect(listed.code).toBe(0);
  return JSON.parse(listed.stdout).sessions;
}

function parkedDir(server: Harness): string {
  return join(server.home, ".cache", "repl-mcp", "run", "parked");
}

type Ending = "stdin" | "SIGTERM" | "SIGKILL";

/** Ends a server the given way and waits until its process is gone. */
async function end(server: Harness, how: Ending): Promise<void> {
  const pid = server.serverPid;
  if (how === "stdin") await server.client.close();
  else process.kill(pid, how);
  await waitFor(() => !pidAlive(pid), { timeoutMs: 10_000, what: "the server to exit" });
  if (how !== "stdin") await server.client.close().catch(() => {});
}

async function runStatus(server: Harness, runId: string, args: Record<string, unknown> = {}) {
  return (await server.call("python_run", { run_id: runId, ...args })).structuredContent;
}

const SETUP = [
  "import json, socket, threading, time",
  "x = 41",
  'server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()',
  "client = socket.create_connection(server.getsockname()); peer, _ = server.accept()",
  'client.sendall(b"before")',
].join("\n");

/** A cell whose thread ticks for 2.5 s; it leaves a marker file when it is done. */
function tickingCell(marker: string): string {
  return [
    "ticks = []",
    "def tick():",
    "    end = time.time() + 2.5",
    "    while time.time() < end:",
    "        ticks.append(time.time()); time.sleep(0.05)",
    "worker = threading.Thread(target=tick); worker.start(); worker.join()",
    `open(${JSON.stringify(marker)}, "w").close()`,
    'print("ticked", len(ticks))',
    '{"count": len(ticks), "gap": max(b - a for a, b in zip(ticks, ticks[1:])), "last": ticks[-1]}',
  ].join("\n");
}

for (const how of ["stdin", "SIGTERM", "SIGKILL"] as Ending[]) {
  keptTest(
    `after ${how === "stdin" ? "stdin closes" : how}, the next server adopts the default session with its variables, import, socket and a thread that ran on`,
    async (start) => {
      const first = await start(KEEP);
      const setup = await first.run(SETUP);
      expect(setup.success).toBe(true);
      const generation = setup.generation as number;
      const health = await first.health();
      expect(health.server.kept).toBe(true);
      expect(health.server.keep.duration).toBe("1h");
      expect(Date.parse(health.server.keep.until)).toBeGreaterThan(Date.now());
      const workerPid = health.server.python.pid as number;

      const marker = join(first.dir, `ticked-${how}`);
      const started = await first.callInSession("python_start", { code: tickingCell(marker) });
      const runId = started.structuredContent.run_id as string;
      await waitFor(async () => (await runStatus(first, runId)).status === "running", {
        what: "the cell to run",
      });
      const exitedAt = Date.now() / 1000;
      await end(first, how);
      expect(pidAlive(workerPid)).toBe(true);
      const parked = await keptList(first);
      expect(parked.map((s) => [s.name, s.state])).toEqual([["default", "parked"]]);
      // stdin: the cell ends while nobody holds the session; otherwise it is adopted while it runs.
      if (how === "stdin") await waitFor(() => existsSync(marker), { what: "the cell to end while parked" });

      const second = await start(KEEP, first);
      const adopted = (await second.health()).server;
      expect(adopted.adopted).toBe(true);
      expect(typeof adopted.parked_since).toBe("string");
      expect(adopted.generation).toBe(generation);
      expect(adopted.python.pid).toBe(workerPid);

      await waitFor(async () => (await runStatus(second, runId)).success !== undefined, {
        timeoutMs: 15_000,
        what: "the cell's result in the new server",
      });
      const result = await runStatus(second, runId);
      expect(result.success).toBe(true);
      expect(result.stdout).toContain("ticked");
      expect(result.value.last).toBeGreaterThan(exitedAt + 0.5);
      expect(result.value.gap).toBeLessThan(1);

      const after = await second.run(
        ['client.sendall(b"after")', "[x + 1, json.dumps({'ok': True}), peer.recv(64).decode()]"].join("\n"),
        { expected_generation: generation },
      );
      expect(after.success).toBe(true);
      expect(after.state_reset).toBe(false);
      expect(after.generation).toBe(generation);
      expect(after.value[0]).toBe(42);
      expect(after.value[1]).toBe('{"ok": true}');
      expect(after.value[2]).toBe("beforeafter");
    },
    60_000,
  );
}

keptTest(
  "an opened session: adopted on open with adopted, parked_since, the same generation and state preserved; its history and expected_generation go on",
  async (start) => {
    const first = await start([]);
    const project = first.project;
    const opened = await first.call("python_session_open", { name: "work", project, keep: "2h" });
    expect(opened.structuredContent.kept).toBe(true);
    expect(opened.structuredContent.adopted).toBe(false);
    const id = opened.structuredContent.session_id;
    const cell = await first.call("execute_python", {
      session_id: id,
      code: "data = list(range(5)); len(data)",
    });
    const generation = cell.structuredContent.generation;
    const unkept = await first.call("python_session_open", { name: "scratch", project });
    expect(unkept.structuredContent.kept).toBe(false);
    await first.call("execute_python", { session_id: unkept.structuredContent.session_id, code: "1" });
    const unkeptPid = (
      await first.call("python_session_inspect", { session_id: unkept.structuredContent.session_id })
    ).structuredContent.python.pid;
    await end(first, "SIGTERM");
    // The session without keep ended with its server, as always.
    await waitFor(() => !pidAlive(unkeptPid), { what: "the unkept worker to stop with its server" });

    const second = await start([], first);
    const again = (await second.call("python_session_open", { name: "work", project })).structuredContent;
    expect(again.adopted).toBe(true);
    expect(again.state).toBe("preserved");
    expect(typeof again.parked_since).toBe("string");
    expect(again.generation).toBe(generation);
    expect(again.kept).toBe(true);
    expect(again.keep.duration).toBe("2h");
    const listed = (await second.call("python_session_list")).structuredContent.sessions;
    expect(listed.find((s: any) => s.name === "work").kept).toBe(true);
    const inspected = (await second.call("python_session_inspect", { session_id: again.session_id }))
      .structuredContent;
    expect(inspected.keep.seconds).toBe(7200);
    const next = await second.call("execute_python", {
      session_id: again.session_id,
      code: "data.append(5); [len(data), len(repl_history())]",
      expected_generation: generation,
    });
    expect(next.structuredContent.value).toEqual([6, 2]);
    const stale = await second.call("execute_python", {
      session_id: again.session_id,
      code: "1",
      expected_generation: generation + 1,
    });
    expect(stale.structuredContent.error_code).toBe("STATE_CHANGED");
    // Closing it ends it for good: no record, no process.
    const pid = inspected.python.pid;
    await second.call("python_session_close", { session_id: again.session_id });
    await waitFor(() => !pidAlive(pid), { what: "the closed session's worker to stop" });
    expect(await keptList(second)).toEqual([]);
  },
  60_000,
);

keptTest(
  "while parked, a cell's bridge request is answered at once: the server that brokered it is gone",
  async (start) => {
    const first = await start(KEEP);
    const go = join(first.dir, "go");
    const code = [
      "import os, time",
      `while not os.path.exists(${JSON.stringify(go)}): time.sleep(0.02)`,
      "try:",
      "    mcp.servers()",
      "except Exception as exc:",
      "    print(type(exc).__name__, getattr(exc, 'code', None), exc)",
      "try:",
      "    input('name? ')",
      "except EOFError as exc:",
      "    print('EOFError', exc)",
    ].join("\n");
    const started = await first.callInSession("python_start", { code });
    const runId = started.structuredContent.run_id as string;
    await waitFor(async () => (await runStatus(first, runId)).status === "running", {
      what: "the cell to run",
    });
    await end(first, "stdin");
    writeFileSync(go, "");
    const second = await start(KEEP, first);
    await waitFor(async () => (await runStatus(second, runId)).success !== undefined, {
      timeoutMs: 15_000,
      what: "the cell's result",
    });
    const result = await runStatus(second, runId);
    expect(result.success).toBe(true);
    expect(result.stdout).toContain("SESSION_PARKED");
    expect(result.stdout).toContain("server that brokered");
    // Answered by the guardian, not left to the bridge's own timeout (whose message is another).
    expect(result.stdout).toContain("EOFError");
    expect(result.stdout).not.toContain("got no answer");
  },
  60_000,
);

keptTest(
  "a cell that floods its stderr while parked still has its result read afterwards",
  async (start) => {
    const first = await start(KEEP);
    const go = join(first.dir, "go");
    const done = join(first.dir, "done");
    const code = [
      "import os, sys, time",
      `while not os.path.exists(${JSON.stringify(go)}): time.sleep(0.02)`,
      "for i in range(12_000):",
      "    os.write(2, b'x' * 1000 + b'\\n')",
      `open(${JSON.stringify(done)}, "w").close()`,
      "'flooded'",
    ].join("\n");
    const started = await first.callInSession("python_start", { code });
    const runId = started.structuredContent.run_id as string;
    await waitFor(async () => (await runStatus(first, runId)).status === "running", {
      what: "the cell to run",
    });
    await end(first, "stdin");
    writeFileSync(go, "");
    // 12 MB of native stderr while nobody holds the session (the guardian keeps 4 MiB of it at most).
    await waitFor(() => existsSync(done), { timeoutMs: 30_000, what: "the flood to end" });
    const second = await start(KEEP, first);
    await waitFor(async () => (await runStatus(second, runId)).success !== undefined, {
      timeoutMs: 15_000,
      what: "the flooding cell's result",
    });
    const result = await runStatus(second, runId);
    expect(result.success).toBe(true);
    expect(result.value).toBe("flooded");
    expect(result.truncated.stderr).toBe(true);
  },
  90_000,
);

keptTest(
  "the viewer of the adopting server shows the session's earlier cells, from the worker's own history",
  async (start) => {
    const first = await start(KEEP);
    await first.run("a = 1");
    await first.run('print("hello from before")\na + 1');
    const started = await first.callInSession("python_start", {
      code: `import os, time\nwhile not os.path.exists(${JSON.stringify(join(first.dir, "go"))}): time.sleep(0.02)\n"late"`,
    });
    const runId = started.structuredContent.run_id;
    await end(first, "stdin");
    const second = await start([...KEEP, "--viewer"], first);
    const events = new EventReader(await viewerOf(second));
    try {
      writeFileSync(join(first.dir, "go"), "");
      await waitFor(() => events.of("run").filter((event) => event.run.status === "earlier").length >= 2, {
        timeoutMs: 15_000,
        what: "the earlier cells on the viewer's stream",
      });
      const earlier = events
        .of("run")
        .filter((event) => event.run.status === "earlier")
        .map((event) => event.run);
      expect(earlier.map((run) => run.source)).toEqual(['print("hello from before")\na + 1', "a = 1"]);
      expect(earlier[0].stdout).toBe("hello from before\n");
      expect(earlier[0].return_value).toBe("2");
      // The cell it adopted running is this server's run now, with the source its worker kept.
      await waitFor(
        () =>
          events.of("run").some((event) => event.run.run_id === runId && event.run.source.includes("late")),
        { what: "the adopted run with its source" },
      );
    } finally {
      await events.close();
    }
  },
  60_000,
);

keptTest(
  "a second server is refused a session the first holds, naming it; once the first dies (kill -9) it adopts it",
  async (start) => {
    const first = await start([]);
    const project = first.project;
    const opened = await first.call("python_session_open", { name: "work", project, keep: "1h" });
    await first.call("execute_python", {
      session_id: opened.structuredContent.session_id,
      code: "y = 'kept'",
    });
    const second = await start([], first);
    const refused = await second.call("python_session_open", { name: "work", project });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent.error_code).toBe("SESSION_HELD");
    expect(refused.structuredContent.error).toContain(`pid ${first.serverPid}`);
    // A kept session whose worker has not started yet (no guardian, no record) is held all the same.
    await first.call("python_session_open", { name: "lazy", project, keep: "1h" });
    const lazy = await second.call("python_session_open", { name: "lazy", project, keep: "1h" });
    expect(lazy.structuredContent.error_code).toBe("SESSION_HELD");
    expect(lazy.structuredContent.error).toContain(`pid ${first.serverPid}`);
    // Within one server, the name is taken too.
    const twice = await first.call("python_session_open", { name: "work", project });
    expect(twice.structuredContent.error_code).toBe("SESSION_HELD");
    expect(twice.structuredContent.error).toContain("already open in this server");
    expect((await keptList(first)).map((s) => [s.state, s.holder_pid])).toEqual([["held", first.serverPid]]);

    process.kill(first.serverPid, "SIGKILL");
    await waitFor(() => !pidAlive(first.serverPid), { what: "the first server to die" });
    // No waiting for its guardian to notice: the open does what it takes.
    const adopted = (await second.call("python_session_open", { name: "work", project })).structuredContent;
    expect(adopted.adopted).toBe(true);
    const value = await second.call("execute_python", { session_id: adopted.session_id, code: "y" });
    expect(value.structuredContent.value).toBe("kept");
  },
  60_000,
);

keptTest(
  "a kept session nobody adopts ends at its expiry with no server running: worker, group, jobs and record",
  async (start) => {
    const first = await start([]);
    const opened = await first.call("python_session_open", {
      name: "brief",
      project: first.project,
      keep: "3s",
    });
    const id = opened.structuredContent.session_id;
    const job = await first.call("execute_python", {
      session_id: id,
      code: "import os, subprocess\np = subprocess.Popen(['sleep', '300'], start_new_session=True)\n[os.getpid(), p.pid]",
    });
    const [workerPid, jobPid] = job.structuredContent.value;
    await end(first, "stdin");
    expect(pidAlive(workerPid)).toBe(true);
    expect(await keptList(first)).toHaveLength(1);
    await waitFor(() => !pidAlive(workerPid) && !pidAlive(jobPid) && taggedPids(first.tag).length === 0, {
      timeoutMs: 10_000,
      what: "the parked worker, its job and its guardian to end at the expiry",
    });
    expect(await keptList(first)).toEqual([]);
    expect(
      readdirSync(parkedDir(first)).filter((name) => name.endsWith(".json") || name.endsWith(".sock")),
    ).toEqual([]);
  },
  30_000,
);

keptTest(
  "a worker killed while parked: the next open says so, starts afresh and goes on counting generations",
  async (start) => {
    const first = await start([]);
    const opened = await first.call("python_session_open", {
      name: "work",
      project: first.project,
      keep: "1h",
    });
    const cell = await first.call("execute_python", {
      session_id: opened.structuredContent.session_id,
      code: "import os; os.getpid()",
    });
    const generation = cell.structuredContent.generation;
    await end(first, "stdin");
    process.kill(cell.structuredContent.value, "SIGKILL");
    await waitFor(() => taggedPids(first.tag).length === 0, { what: "the guardian to follow its worker" });
    const listed = await keptList(first);
    expect(listed.map((s) => s.state)).toEqual(["ended"]);
    expect(listed[0].reason).toContain("killed");

    const second = await start([], first);
    const again = (await second.call("python_session_open", { name: "work", project: first.project }))
      .structuredContent;
    expect(again.adopted).toBe(false);
    expect(again.state_reset).toBe(true);
    expect(again.state_reset_reason).toContain("SIGKILL");
    const stale = await second.call("execute_python", {
      session_id: again.session_id,
      code: "1",
      expected_generation: generation,
    });
    expect(stale.structuredContent.error_code).toBe("STATE_CHANGED");
    const fresh = await second.call("execute_python", {
      session_id: again.session_id,
      code: "'x' in globals()",
    });
    expect(fresh.structuredContent.value).toBe(false);
    expect(fresh.structuredContent.generation).toBeGreaterThan(generation);
  },
  60_000,
);

keptTest(
  "a record whose worker is gone (its group killed, or left by another boot of the machine) is removed at once",
  async (start) => {
    const first = await start([]);
    for (const name of ["a", "b"]) {
      const opened = await first.call("python_session_open", { name, project: first.project, keep: "1h" });
      await first.call("execute_python", { session_id: opened.structuredContent.session_id, code: "1" });
    }
    await end(first, "stdin");
    const records = readdirSync(parkedDir(first)).filter((name) => name.endsWith(".json"));
    expect(records).toHaveLength(2);
    // Both groups go without a word (as at a power cut); one record is also made to look another boot's.
    for (const name of records) {
      const record = JSON.parse(readFileSync(join(parkedDir(first), name), "utf8"));
      process.kill(-record.guardian_pid, "SIGKILL");
      if (record.name === "b") {
        writeFileSync(join(parkedDir(first), name), JSON.stringify({ ...record, boot_id: "another-boot" }), {
          mode: 0o600,
        });
      }
    }
    await waitFor(() => taggedPids(first.tag).length === 0, { what: "the killed groups to be gone" });
    const second = await start([], first);
    const a = (await second.call("python_session_open", { name: "a", project: first.project }))
      .structuredContent;
    expect(a.state_reset).toBe(true);
    expect(a.state_reset_reason).toContain("guardian is gone");
    const b = (await second.call("python_session_open", { name: "b", project: first.project }))
      .structuredContent;
    expect(b.state_reset_reason).toContain("machine has restarted");
    expect(readdirSync(parkedDir(first)).filter((name) => name.endsWith(".json"))).toEqual([]);
  },
  60_000,
);

keptTest(
  "adoption needs the parking secret: a wrong proof, a replaced secret and another user are all refused",
  async (start) => {
    const first = await start(KEEP);
    await first.run("z = 7");
    await end(first, "stdin");
    const dir = parkedDir(first);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, "secret")).mode & 0o777).toBe(0o600);
    const record = JSON.parse(
      readFileSync(join(dir, readdirSync(dir).find((name) => name.endsWith(".json")) as string), "utf8"),
    );
    expect(JSON.stringify(record)).not.toContain(readFileSync(join(dir, "secret"), "utf8").trim());

    // Knowing the socket is not enough: a made-up proof is refused and the worker stays parked.
    const answer = await rawAdopt(record.socket, "0".repeat(64));
    expect(answer).toContain('"refused"');
    expect(answer).toContain("WRONG_SECRET");

    // Another user cannot even reach the socket (the directory is 0700).
    if (process.getuid?.() === 0) {
      const other = await run(
        [
          "setpriv",
          "--reuid=nobody",
          "--regid=nogroup",
          "--clear-groups",
          "python3",
          "-c",
          `import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(${JSON.stringify(record.socket)}); print("connected")\nexcept OSError as e:\n    print(type(e).__name__)`,
        ],
        { timeoutMs: 20_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } },
      );
      expect(other.stdout.trim()).toBe("PermissionError");
    }

    // A server whose secret is not the guardian's is refused with a message saying so, and adopts nothing.
    const secret = join(dir, "secret");
    const original = readFileSync(secret, "utf8");
    rmSync(secret);
    writeFileSync(secret, `${"ab".repeat(32)}\n`, { mode: 0o600 });
    const second = await start(KEEP, first);
    const health = (await second.health()).server;
    expect(health.adopted).toBeUndefined();
    expect(health.kept).toBe(false);
    expect(second.stderr).toContain("parking secret");
    await second.client.close();
    await waitFor(() => !pidAlive(second.serverPid), { what: "the second server to exit" });
    rmSync(secret);
    writeFileSync(secret, original, { mode: 0o600 });
    const parked = await keptList(first);
    expect(parked.map((s) => s.state)).toEqual(["parked"]);
  },
  60_000,
);

keptTest(
  "sessions stop --all ends every parked session and its detached jobs; nothing is left",
  async (start) => {
    const first = await start([]);
    const pids: number[] = [];
    for (const name of ["one", "two"]) {
      const opened = await first.call("python_session_open", { name, project: first.project, keep: "1h" });
      const cell = await first.call("execute_python", {
        session_id: opened.structuredContent.session_id,
        code: "import os, subprocess\np = subprocess.Popen(['sleep', '300'], start_new_session=True)\n[os.getpid(), p.pid]",
      });
      pids.push(...cell.structuredContent.value);
    }
    await end(first, "stdin");
    const doctor = await run([BINARY, "doctor", "--json"], {
      env: first.env(),
      cwd: first.project,
      timeoutMs: 30_000,
    });
    const kept = JSON.parse(doctor.stdout).kept;
    expect(kept.parked).toBe(2);
    expect(kept.rss_bytes).toBeGreaterThan(1_048_576);
    expect(kept.findings[0].text).toContain("2 parked sessions");
    const listed = await sessions(first, []);
    expect(listed.stdout).toContain("one");
    expect(listed.stdout).toContain("parked");
    const named = await sessions(first, ["stop", "one"]);
    expect(named.code).toBe(0);
    expect(named.stdout).toContain("stopped: one");
    await waitFor(() => !pidAlive(pids[0] as number) && !pidAlive(pids[1] as number), {
      what: "session one's worker and job",
    });
    expect(pidAlive(pids[2] as number)).toBe(true);
    const all = await sessions(first, ["stop", "--all"]);
    expect(all.code).toBe(0);
    await waitFor(() => pids.every((pid) => !pidAlive(pid)) && taggedPids(first.tag).length === 0, {
      what: "every parked worker, job and guardian",
    });
    expect(await keptList(first)).toEqual([]);
    const missing = await sessions(first, ["stop", "one"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no kept session named "one"');
  },
  60_000,
);

keptTest(
  "keep values are checked: bad ones name the value, a keep over the maximum names the maximum",
  async (start) => {
    const first = await start(["--keep-sessions-max", "2h"]);
    const bad = await first.call("python_session_open", { name: "w", project: first.project, keep: "soon" });
    expect(bad.structuredContent.error_code).toBe("INVALID_ARGUMENT");
    expect(bad.structuredContent.error).toContain('"soon"');
    const long = await first.call("python_session_open", { name: "w", project: first.project, keep: "3h" });
    expect(long.structuredContent.error).toContain("2h");
    const flag = await run([BINARY, "--keep-sessions", "forever"], { env: first.env(), timeoutMs: 20_000 });
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('"forever"');
    const over = await run([BINARY, "--keep-sessions", "8d"], { env: first.env(), timeoutMs: 20_000 });
    expect(over.code).toBe(2);
    expect(over.stderr).toContain("--keep-sessions-max");
  },
  30_000,
);

/** Connects to a guardian's socket as an adopter would, with `proof`; returns what it answered. */
async function rawAdopt(path: string, proof: string): Promise<string> {
  let text = "";
  let sent = false;
  const socket = await Bun.connect({
    unix: path,
    socket: {
      data(socket, chunk) {
        text += new TextDecoder().decode(chunk);
        if (!sent && text.includes("\n")) {
          sent = true;
          socket.write(`${JSON.stringify({ guardian: "adopt", proof, holder: process.pid })}\n`);
        }
      },
    },
  });
  await waitFor(() => text.split("\n").length > 2, { what: "the guardian's answer" });
  socket.end();
  return text;
}
