// The durable journal (--journal PATH): one owner at a time, only trustworthy files accepted, calls cut
// off by a crash reported as outcome_unknown, provenance kept across restarts, and a persisting failure
// after a completed call reported as such.
import { afterAll, afterEach, expect, test } from "bun:test";
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { bundled } from "../fixtures/peers/bundle.ts";
import { BINARY, Harness, taggedPids, tempDir, cellValue as value, waitFor } from "../support/harness.ts";
import { run } from "../support/run.ts";

/** Bundled: every test here starts it, one twice. */
const STDIO_PEER = await bundled(resolve(import.meta.dir, "../fixtures/peers/stdio-peer.ts"));
afterAll(() => rmSync(dirname(STDIO_PEER), { recursive: true, force: true }));
const OWNED = "Broker journal is already owned by another runtime; choose a separate --journal path";

const harnesses: Harness[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function journalDir(): string {
  const dir = tempDir("repl-mcp-journal-");
  dirs.push(dir);
  return dir;
}

async function server(journal: string, env: Record<string, string> = {}): Promise<Harness> {
  const harness = await Harness.start({
    args: ["--journal", journal],
    env,
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({ mcpServers: { peer: { command: process.execPath, args: [STDIO_PEER] } } }),
      ),
  });
  harnesses.push(harness);
  return harness;
}

const onDisk = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>[];

/** Starts the binary on `journal` with stdin held open; it must exit by itself within the deadline. */
async function startupFailure(journal: string) {
  const cwd = journalDir();
  // run() fails if the deadline's kill was needed: the server must leave on its own.
  return run([BINARY, "--journal", journal], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd },
    stdin: "pipe",
    timeoutMs: 5_000,
  });
}

/** A regular file's text (not followed through a link), else its kind, to see a refused file untouched. */
function contentOf(path: string): string {
  const stat = lstatSync(path);
  return stat.isFile() ? readFileSync(path, "utf8") : stat.isDirectory() ? "directory" : "link";
}

const record = (extra: Record<string, unknown> = {}) => ({
  id: "1700000000000-00000000-0000-4000-8000-000000000000",
  session_id: "s",
  project: "/p",
  run_id: null,
  server: "peer",
  tool: "echo",
  started_ms: 1700000000000,
  finished_ms: 1700000000001,
  status: "completed",
  ...extra,
});

test("records are written 0600 as calls happen, metadata only, and a second server is refused", async () => {
  const dir = journalDir();
  const path = join(dir, "journal.json");
  const harness = await server(path);
  expect(onDisk(path)).toEqual([]);
  expect(statSync(path).mode & 0o777).toBe(0o600);
  expect(statSync(join(dir, "journal.lock")).mode & 0o777).toBe(0o600);
  await value(harness, "mcp.call('peer', 'echo', text='secret-argument')\nNone");
  const [written] = onDisk(path);
  expect(written).toMatchObject({ server: "peer", tool: "echo", status: "completed" });
  expect(readFileSync(path, "utf8")).not.toContain("secret-argument");
  expect(await value(harness, "mcp.journal()")).toEqual(onDisk(path));

  const second = await startupFailure(path);
  expect(second.code).toBe(1);
  expect(second.stderr).toContain(OWNED);
  expect(second.stdout).toBe("");
  expect(onDisk(path)).toHaveLength(1);

  await harness.close();
  harnesses.length = 0;
  const third = await server(path);
  expect(await value(third, "len(mcp.journal())")).toBe(1);
});

test("an untrustworthy journal file stops the start-up with a clear reason", async () => {
  const dir = journalDir();
  const cases: [string, (path: string) => void, string][] = [
    ["public", (p) => writeFileSync(p, "[]", { mode: 0o644 }), "must not be accessible to group or others"],
    ["notjson", (p) => writeFileSync(p, "{oops", { mode: 0o600 }), "it is not JSON"],
    ["object", (p) => writeFileSync(p, "{}", { mode: 0o600 }), "expected a JSON array of records"],
    [
      "extra",
      (p) => writeFileSync(p, JSON.stringify([record({ arguments: { a: 1 } })]), { mode: 0o600 }),
      'record 0 has the unknown key "arguments"',
    ],
    [
      "status",
      (p) => writeFileSync(p, JSON.stringify([record(), record({ status: "done" })]), { mode: 0o600 }),
      'record 1 has an invalid "status"',
    ],
    [
      "missing",
      (p) => writeFileSync(p, JSON.stringify([{ ...record(), tool: undefined }]), { mode: 0o600 }),
      'record 0 lacks "tool"',
    ],
    [
      "many",
      (p) => writeFileSync(p, JSON.stringify(Array.from({ length: 257 }, () => record())), { mode: 0o600 }),
      "more than 256 records",
    ],
    ["large", (p) => writeFileSync(p, " ".repeat(1_048_577), { mode: 0o600 }), "exceeds 1048576 bytes"],
    ["directory", (p) => mkdirSync(p), "must be a regular file"],
    [
      "symlink",
      (p) => {
        writeFileSync(`${p}.real`, "[]", { mode: 0o600 });
        symlinkSync(`${p}.real`, p);
      },
      "must not be a symbolic link",
    ],
  ];
  if (process.geteuid?.() === 0) {
    cases.push([
      "foreign",
      (p) => {
        writeFileSync(p, "[]", { mode: 0o600 });
        chownSync(p, 65534, 65534);
      },
      "must be owned by the user running repl-mcp",
    ]);
  }
  for (const [name, make, reason] of cases) {
    const path = join(dir, `${name}.json`);
    make(path);
    const before = contentOf(path);
    const result = await startupFailure(path);
    expect({ name, code: result.code }).toEqual({ name, code: 1 });
    expect(result.stderr).toContain(reason);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    expect(result.stdout).toBe("");
    expect(contentOf(path)).toBe(before); // a refused file is left as it was
  }
  const fifo = join(dir, "fifo.json");
  expect(Bun.spawnSync(["mkfifo", "-m", "600", fifo]).exitCode).toBe(0);
  const result = await startupFailure(fifo);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain("must be a regular file");
  const lockLink = join(dir, "linked.lock");
  symlinkSync(join(dir, "elsewhere"), lockLink);
  const linked = await startupFailure(join(dir, "linked.json"));
  expect(linked.code).toBe(1);
  expect(linked.stderr).toContain("is a symbolic link");
  expect(existsSync(join(dir, "elsewhere"))).toBe(false);
}, 60_000);

test("after kill -9 in the middle of a call, a restart reports it outcome_unknown, with its provenance", async () => {
  const path = join(journalDir(), "journal.json");
  const first = await server(path);
  const marker = join(first.dir, "written");
  await value(first, "mcp.call('peer', 'echo', text='before')\nNone");
  const started = (
    await first.call("python_start", {
      code: `mcp.call('peer', 'slow_write', arguments={'path': ${JSON.stringify(marker)}, 'seconds': 60})`,
    })
  ).structuredContent;
  await waitFor(() => onDisk(path).some((entry) => entry.status === "dispatched"), {
    timeoutMs: 15_000,
    what: "the dispatched record on disk",
  });
  const firstSession = (await first.health()).server.session_id;
  process.kill(first.serverPid, "SIGKILL");
  await waitFor(() => taggedPids(first.tag).length === 0, {
    timeoutMs: 10_000,
    what: "the first tree to die",
  });

  const second = await server(path);
  const records = await value(second, "mcp.journal()");
  expect(records.map((entry: Record<string, unknown>) => [entry.tool, entry.status])).toEqual([
    ["echo", "completed"],
    ["slow_write", "outcome_unknown"],
  ]);
  expect(records[1]).toMatchObject({
    session_id: firstSession,
    project: first.project,
    run_id: started.run_id,
  });
  expect(onDisk(path)).toEqual(records);
  expect(existsSync(marker)).toBe(false);

  await value(second, "mcp.call('peer', 'echo', text='after')\nNone");
  const secondSession = (await second.health()).server.session_id;
  const after = onDisk(path);
  expect(after).toHaveLength(3);
  expect(after[2]).toMatchObject({ tool: "echo", status: "completed", session_id: secondSession });
  expect(after[2]?.project).toBe(second.project);
  expect(after[0]?.project).toBe(first.project);
  expect((await second.health()).broker.journal).toBe(3);
}, 60_000);

test("a journal that cannot be updated after a call completed says so, and the call is not repeated", async () => {
  const path = join(journalDir(), "journal.json");
  const harness = await server(path);
  const marker = join(harness.dir, "written");
  await value(harness, "mcp.list_tools('peer')\nNone");
  const started = (
    await harness.call("python_start", {
      code: [
        "try:",
        `    mcp.call('peer', 'slow_write', arguments={'path': ${JSON.stringify(marker)}, 'seconds': 8})`,
        "    out = 'no error'",
        "except Exception as e:",
        "    out = str(e)",
        "out",
      ].join("\n"),
    })
  ).structuredContent;
  await waitFor(() => onDisk(path).some((entry) => entry.status === "dispatched"), {
    timeoutMs: 3_000,
    what: "the dispatched record on disk",
  });
  // A directory where the journal was: the atomic replace fails, even for root.
  rmSync(path);
  mkdirSync(path);
  writeFileSync(join(path, "keep"), "");
  let finished: Record<string, any> = {};
  await waitFor(
    async () => {
      finished = (await harness.call("python_run", { run_id: started.run_id })).structuredContent;
      return "success" in finished;
    },
    { timeoutMs: 15_000, what: "the call to finish" },
  );
  expect(finished.value).toBe("MCP call completed but durable journal update failed; do not retry blindly");
  expect(readFileSync(marker, "utf8")).toBe("written");
  expect(await value(harness, "[r['status'] for r in mcp.journal()]")).toEqual(["completed"]);

  const refused = await value(
    harness,
    "try:\n    mcp.call('peer', 'echo', text='x')\n    out = 'sent'\nexcept Exception as e:\n    out = str(e)\nout",
  );
  expect(refused).toStartWith("MCP call was not sent: the durable journal could not be updated");
  expect(await value(harness, "len(mcp.journal())")).toBe(1);
}, 30_000);

// Issue 20, defect 1: the answer must not run ahead of the file. A call that timed out after dispatch
// used to come back while the file still said "dispatched" (the memory already said outcome_unknown).
test("a call that times out after dispatch is outcome_unknown on disk before the cell hears of it", async () => {
  const dir = journalDir();
  const journal = join(dir, "journal.json");
  const harness = await server(journal);
  const result = await value(
    harness,
    [
      "import json",
      "mcp.list_tools('peer')  # connected and listed, so the slow call is dispatched at once",
      "try:",
      // 1 s is far past the time to dispatch (even on a loaded machine) and far short of the 3 s write.
      "    mcp.call('peer', 'slow_write', arguments={'path': '/nonexistent/never', 'seconds': 3}, timeout=1)",
      "    error = None",
      "except Exception as e:",
      "    error = str(e)",
      // Read the file the moment the error arrives, from inside the cell: nothing can have caught up.
      `on_disk = [r['status'] for r in json.load(open(${JSON.stringify(journal)}))]`,
      "[error, on_disk, [r['status'] for r in mcp.journal()]]",
    ].join("\n"),
  );
  expect(result[0]).toContain("MCP deadline exceeded; external outcome is unknown");
  expect(result[1]).toEqual(["outcome_unknown"]);
  expect(result[2]).toEqual(["outcome_unknown"]);
});

test("when an unknown outcome cannot be written, the call says both", async () => {
  const path = join(journalDir(), "journal.json");
  const harness = await server(path);
  await value(harness, "mcp.list_tools('peer')\nNone");
  const started = (
    await harness.call("python_start", {
      code: [
        "try:",
        "    mcp.call('peer', 'slow_write', arguments={'path': '/nonexistent/never', 'seconds': 8}, timeout=2)",
        "    out = 'no error'",
        "except Exception as e:",
        "    out = str(e)",
        "out",
      ].join("\n"),
    })
  ).structuredContent;
  await waitFor(() => onDisk(path).some((entry) => entry.status === "dispatched"), {
    timeoutMs: 3_000,
    what: "the dispatched record on disk",
  });
  rmSync(path);
  mkdirSync(path);
  let finished: Record<string, any> = {};
  await waitFor(
    async () => {
      finished = (await harness.call("python_run", { run_id: started.run_id })).structuredContent;
      return "success" in finished;
    },
    { timeoutMs: 15_000, what: "the call to time out" },
  );
  expect(finished.value).toStartWith("MCP call outcome is unknown (it was sent and may have taken effect)");
  expect(finished.value).toContain("the durable journal could not record that");
  expect(await value(harness, "[r['status'] for r in mcp.journal()]")).toEqual(["outcome_unknown"]);
}, 30_000);
