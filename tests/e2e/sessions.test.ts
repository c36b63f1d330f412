// Independent sessions on their own projects and interpreters.
import { afterAll, afterEach, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, REAL_PYTHON, taggedPids, tempDir, waitFor } from "../support/harness.ts";

// A test that looks at the whole server (its list of sessions, its processes, its default session, its
// death) starts one of its own; a test that looks only at the sessions it opens opens them on a server
// the file shares, in a directory of its own, and they are closed after it.
let own: Harness | undefined;
let shared: Promise<Harness> | undefined;
const opened: string[] = [];
const scratch: string[] = [];
afterEach(async () => {
  await own?.close();
  own = undefined;
  const server = await shared;
  for (const id of opened.splice(0)) await server?.call("python_session_close", { session_id: id });
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});
afterAll(async () => {
  await (await shared)?.close();
});

async function ownServer(): Promise<Harness> {
  own = await Harness.start();
  return own;
}

/** The file's shared server, and a directory (with a project) of the test's own. */
async function sharedServer(): Promise<{ h: Harness; dir: string; project: string }> {
  shared ??= Harness.start();
  const dir = tempDir();
  scratch.push(dir);
  mkdirSync(join(dir, "project"));
  return { h: await shared, dir, project: join(dir, "project") };
}

function executable(path: string, text: string): string {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
  return path;
}

/** A project whose .venv/bin/python is a wrapper adding a project-only module directory. */
function worktree(dir: string, name: string): string {
  const project = join(dir, name);
  mkdirSync(join(project, ".venv", "bin"), { recursive: true });
  mkdirSync(join(project, "lib"));
  writeFileSync(join(project, "lib", "projmod.py"), `NAME = ${JSON.stringify(name)}\n`);
  executable(
    join(project, ".venv", "bin", "python"),
    `#!/bin/sh\nPYTHONPATH=${join(project, "lib")} exec ${REAL_PYTHON} "$@"\n`,
  );
  return project;
}

/** Opens a session on `h`; one on the shared server is closed after the test. */
async function open(h: Harness, args: Record<string, unknown>) {
  const result = await h.call("python_session_open", args);
  if (h !== own && typeof result.structuredContent.session_id === "string")
    opened.push(result.structuredContent.session_id);
  return result;
}

test("two worktrees: each session uses its own .venv, imports its own module and writes in its own project", async () => {
  const h = await ownServer();
  const a = worktree(h.dir, "tree-a");
  const b = worktree(h.dir, "tree-b");
  const sa = (await open(h, { name: "a", project: a })).structuredContent;
  const sb = (await open(h, { name: "b", project: b })).structuredContent;
  expect(sa.environment).toMatchObject({
    source: "project_venv",
    python: join(a, ".venv/bin/python"),
    validated: true,
  });
  expect(sa.environment.runtime_status).toBe("lazy");
  expect(sa.generation).toBe(0);
  expect(sa.session_id).not.toBe(sb.session_id);
  const code = "import projmod\nopen('owner.txt', 'w').write(projmod.NAME)\nprojmod.NAME";
  const [ra, rb] = await Promise.all([
    h.run(code, { session_id: sa.session_id }),
    h.run(code, { session_id: sb.session_id }),
  ]);
  expect(ra.value).toBe("tree-a");
  expect(rb.value).toBe("tree-b");
  expect(readFileSync(join(a, "owner.txt"), "utf8")).toBe("tree-a");
  expect(readFileSync(join(b, "owner.txt"), "utf8")).toBe("tree-b");
  const listed = (await h.call("python_session_list")).structuredContent;
  expect(listed.sessions.map((s: { name: string }) => s.name)).toEqual(["a", "b", "default"]);
  expect(listed.limit).toBe(32);
});

test("sessions run in parallel and keep separate state; resetting one leaves the other", async () => {
  const { h, project } = await sharedServer();
  const s1 = (await open(h, { name: "same", project })).structuredContent.session_id;
  const s2 = (await open(h, { name: "same", project })).structuredContent.session_id;
  expect(s1).not.toBe(s2);
  const began = performance.now();
  const [r1, r2] = await Promise.all([
    h.run("import time\ntime.sleep(0.5)\nv = 1\nv", { session_id: s1 }),
    h.run("import time\ntime.sleep(0.5)\nv = 2\nv", { session_id: s2 }),
  ]);
  expect([r1.value, r2.value]).toEqual([1, 2]);
  expect(performance.now() - began).toBeLessThan(5_000);
  await h.run("1", { session_id: s1, reset: true });
  expect((await h.run("v", { session_id: s2 })).value).toBe(2);
  expect((await h.run("'v' in globals()", { session_id: s1 })).value).toBe(false);
});

test("closing: cancels the run, stops the worker, routes no more; twice is an error; default stays", async () => {
  const h = await ownServer();
  const id = (await open(h, { name: "closing", project: h.project })).structuredContent.session_id;
  await h.call("python_start", { code: "import time\ntime.sleep(30)", session_id: id });
  await waitFor(() => h.children().length === 2, { timeoutMs: 10_000, what: "the worker" });
  const closed = await h.call("python_session_close", { session_id: id });
  expect(closed.structuredContent).toMatchObject({ closed: true, session_id: id });
  await waitFor(() => h.children().length === 0, { timeoutMs: 5_000, what: "the worker to stop" });
  const again = await h.call("python_session_close", { session_id: id });
  expect(again.isError).toBe(true);
  expect(again.structuredContent.error).toBe("Session not found or already closed");
  await expect(h.call("execute_python", { code: "1", session_id: id })).rejects.toThrow(
    "Session not found or closed; open a new session",
  );
  const health = await h.health();
  const dflt = await h.call("python_session_close", { session_id: health.server.session_id });
  expect(dflt.isError).toBe(true);
  expect(dflt.structuredContent.error).toContain("cannot be closed");
});

test("bad projects and interpreters are refused with clear errors and register nothing", async () => {
  const { h, dir, project } = await sharedServer();
  const ids = async () =>
    (await h.call("python_session_list")).structuredContent.sessions.map(
      (s: { session_id: string }) => s.session_id,
    );
  const before = await ids();
  const missing = await open(h, { name: "x", project: join(dir, "nope") });
  expect(missing.structuredContent.error).toBe("Project directory does not exist");
  writeFileSync(join(dir, "file"), "");
  expect((await open(h, { name: "x", project: join(dir, "file") })).structuredContent.error).toBe(
    "Project must be a directory",
  );
  expect((await open(h, { name: "x", project, python: "/no/such/python" })).structuredContent.error).toBe(
    "Requested Python executable does not exist",
  );
  expect((await open(h, { name: "x", project, python: "no-such-python-xyz" })).structuredContent.error).toBe(
    "Requested Python executable was not found on PATH",
  );
  const notPython = executable(join(dir, "fake"), "#!/bin/sh\necho hello\n");
  expect((await open(h, { name: "x", project, python: notPython })).structuredContent.error).toBe(
    "Requested executable is not a supported Python interpreter",
  );
  const old = executable(
    join(dir, "old"),
    `#!/bin/sh\necho '{"implementation": "cpython", "version": "3.8.1", "major": 3, "minor": 8, "executable": "/x"}'\n`,
  );
  expect((await open(h, { name: "x", project, python: old })).structuredContent.error).toContain(
    "Python 3.10 or newer is required",
  );
  const broken = join(dir, "broken");
  mkdirSync(join(broken, ".venv", "bin"), { recursive: true });
  symlinkSync("/no/such/python", join(broken, ".venv", "bin", "python"));
  expect((await open(h, { name: "x", project: broken })).structuredContent.error).toContain(
    ".venv/bin/python is missing",
  );
  // The server is shared: nothing registered is the same list of sessions as before.
  expect(await ids()).toEqual(before);
});

test("a client cancelling an open kills the probe and registers nothing", async () => {
  const h = await ownServer();
  const hang = executable(join(h.dir, "hang"), "#!/bin/sh\nexec sleep 60\n");
  const controller = new AbortController();
  const pending = h.client.callTool(
    { name: "python_session_open", arguments: { name: "c", project: h.project, python: hang } },
    { signal: controller.signal },
  );
  await waitFor(() => h.children().length >= 2, { timeoutMs: 10_000, what: "the probe" });
  controller.abort();
  await expect(pending).rejects.toThrow();
  await waitFor(() => h.children().length === 0, { timeoutMs: 3_000, what: "the probe to be killed" });
  expect((await h.call("python_session_list")).structuredContent.sessions).toHaveLength(1);
});

test("session_inspect: metadata, and an inventory that never enters history", async () => {
  const { h, project } = await sharedServer();
  const id = (await open(h, { name: "ins", project })).structuredContent.session_id;
  const plain = (await h.call("python_session_inspect", { session_id: id })).structuredContent;
  expect(plain.environment.runtime_status).toBe("lazy");
  expect(plain.namespace).toBeUndefined();
  await h.run("numbers = [1, 2, 3]\nname = 'x'", { session_id: id });
  const inspected = (await h.call("python_session_inspect", { session_id: id, include_namespace: true }))
    .structuredContent;
  const names = inspected.namespace.variables.map((entry: { name: string }) => entry.name);
  expect(names).toEqual(expect.arrayContaining(["numbers", "name"]));
  expect(inspected.namespace.variables.find((e: { name: string }) => e.name === "numbers")).toMatchObject({
    type: "list",
    length: 3,
  });
  expect(inspected.namespace.values_included).toBe(false);
  const latest = (await h.call("python_run", { session_id: id })).structuredContent;
  expect(latest.success).toBe(true);
  expect(latest.stdout).toBe("");
  expect(latest.namespace).toBeUndefined();
});

test("processes of all sessions die with the server", async () => {
  const h = await ownServer();
  const id = (await open(h, { name: "k", project: h.project })).structuredContent.session_id;
  await h.run("1", { session_id: id });
  await h.run("1");
  expect(h.children().length).toBe(4);
  process.kill(h.serverPid, "SIGKILL");
  await waitFor(() => taggedPids(h.tag).length === 0, { timeoutMs: 5_000, what: "all workers to die" });
  expect(existsSync(h.project)).toBe(true);
});
