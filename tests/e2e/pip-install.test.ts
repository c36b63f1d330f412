// pip_install() against real interpreters, offline: Debian's system python3 (externally managed),
// virtual environments made with python3-venv, and wheels this test writes itself. Without venv the
// tests skip and say why.
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Harness, tempDir } from "../support/harness.ts";
import { run } from "../support/run.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";
const MAKE_WHEEL = resolve(import.meta.dir, "../fixtures/python/make_wheel.py");

function probe(code: string): string | undefined {
  try {
    const result = Bun.spawnSync([SYSTEM_PYTHON, "-c", code], { stdout: "pipe", stderr: "pipe" });
    return result.exitCode === 0 ? result.stdout.toString().trim() : undefined;
  } catch {
    return undefined;
  }
}

const reason =
  probe("import venv, ensurepip") === undefined
    ? `${SYSTEM_PYTHON} cannot make virtual environments with pip (install python3-venv)`
    : undefined;
const marker = probe(
  "import os, sys, sysconfig\np = os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')\nprint(p if sys.prefix == sys.base_prefix and os.path.isfile(p) else '')",
);
const managedReason = marker ? undefined : `${SYSTEM_PYTHON} is not marked externally managed (PEP 668)`;
if (reason) console.warn(`skipping pip_install tests: ${reason}`);
if (managedReason) console.warn(`skipping the externally-managed test: ${managedReason}`);
const real = test.skipIf(reason !== undefined);
const managed = test.skipIf(managedReason !== undefined);

let dir: string;
let wheels: string;
/** A directory on PATH with nothing in it: no uv, so pip is what installs. */
let emptyPath: string;
let withPip: string;
let withoutPip: string;
/** Never asked: an index every test would fail on, if it were. */
const OFFLINE = { PIP_CONFIG_FILE: "/dev/null", PIP_INDEX_URL: "http://127.0.0.1:9/simple" };

async function makeWheel(name: string, version: string): Promise<void> {
  const made = await run([SYSTEM_PYTHON, MAKE_WHEEL, wheels, name, version]);
  expect(made.code).toBe(0);
}

async function venv(project: string, ...flags: string[]): Promise<void> {
  mkdirSync(project);
  const made = await run([SYSTEM_PYTHON, "-m", "venv", ...flags, join(project, ".venv")], {
    timeoutMs: 120_000,
  });
  expect(made.stderr).toBe("");
  expect(made.code).toBe(0);
}

/** Unpacks the pip wheel ensurepip installs from into the running venv's site-packages; exit 3 without one. */
const UNPACK_PIP = [
  "import ensurepip, glob, os, sysconfig, zipfile",
  "dirs = [sysconfig.get_config_var('WHEEL_PKG_DIR'), os.path.join(os.path.dirname(ensurepip.__file__), '_bundled')]",
  "wheels = [w for d in dirs if d for w in glob.glob(os.path.join(d, 'pip-*.whl'))]",
  "if not wheels:",
  "    raise SystemExit(3)",
  "zipfile.ZipFile(wheels[0]).extractall(sysconfig.get_path('purelib'))",
].join("\n");

/**
 * A venv with pip: made by python3-venv, with pip unpacked from the very wheel ensurepip installs. Having
 * ensurepip install pip and setuptools and compile them costs some 4 s of CPU, and these tests are about
 * pip_install, not ensurepip. Where no such wheel is found, ensurepip does it after all.
 */
async function venvWithPip(project: string): Promise<void> {
  await venv(project, "--without-pip");
  const unpacked = await run([join(project, ".venv", "bin", "python"), "-c", UNPACK_PIP]);
  if (unpacked.code === 0) return;
  expect([unpacked.code, unpacked.stderr]).toEqual([3, ""]);
  rmSync(project, { recursive: true, force: true });
  await venv(project);
}

beforeAll(async () => {
  if (reason) return;
  dir = tempDir("repl-mcp-pip-");
  wheels = join(dir, "wheels");
  emptyPath = join(dir, "empty-path");
  mkdirSync(wheels);
  mkdirSync(emptyPath);
  withPip = join(dir, "with-pip");
  withoutPip = join(dir, "without-pip");
  await Promise.all([
    venvWithPip(withPip),
    venv(withoutPip, "--without-pip"),
    makeWheel("replmcp-tiny", "0.1.0"),
  ]);
});
afterAll(async () => {
  if (offline) await (await offline).close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

let h: Harness | undefined;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

// The tests that run offline with no uv on PATH share one server (whose default session runs the system
// Python), each in a session of its own: a server costs more CPU to start than such a test's checks, and
// the venvs they install into are shared by all tests anyway.
let offline: Promise<Harness> | undefined;
function offlineServer(): Promise<Harness> {
  offline ??= Harness.start({ args: ["--python", SYSTEM_PYTHON], env: { ...OFFLINE, PATH: emptyPath } });
  return offline;
}

/** A session opened on `project` (its .venv): on the offline server, or with `env` on a server of its own. */
async function sessionOn(project: string, env?: Record<string, string>) {
  const harness = env
    ? await Harness.start({ args: ["--python", SYSTEM_PYTHON], env })
    : await offlineServer();
  if (env) h = harness;
  const opened = await harness.call("python_session_open", { name: "venv", project });
  expect(opened.isError).toBe(false);
  const sessionId = opened.structuredContent.session_id as string;
  if (!env) cleanups.push(() => harness.call("python_session_close", { session_id: sessionId }));
  return (code: string, args: Record<string, unknown> = {}) =>
    harness.run(code, { session_id: sessionId, timeout: 300, ...args });
}

managed("an externally managed system Python refuses, says what to do, and installs nothing", async () => {
  // In the default session, which runs the system Python itself.
  const server = await offlineServer();
  const refused = await server.run(`pip_install('replmcp-tiny', find_links=${JSON.stringify(wheels)})`);
  expect(refused.success).toBe(false);
  expect(refused.error).toContain(
    `RuntimeError: Cannot install into ${SYSTEM_PYTHON}: it is an externally managed system Python (${marker}, PEP 668); nothing was installed.`,
  );
  expect(refused.error).toContain("-m venv .venv");
  expect(refused.error).toContain("python_session_open");
  const installed = await server.run(
    "import importlib.metadata, importlib.util\n[importlib.util.find_spec('replmcp_tiny'), [d.metadata['Name'] for d in importlib.metadata.distributions() if d.metadata['Name'] == 'replmcp-tiny']]",
  );
  expect(installed.value).toEqual([null, []]);
});

real("an offline install from a wheel directory into the session's .venv, then an upgrade", async () => {
  const cell = await sessionOn(withPip);
  const python = join(withPip, ".venv", "bin", "python");
  expect((await cell("import sys\nsys.executable")).value).toBe(python);

  const first = await cell(
    `r = pip_install('replmcp-tiny', find_links=${JSON.stringify(wheels)})\n[type(r).__name__, r.ok, r.truncated, r.changed, r.needs_reset]`,
  );
  expect(first.value).toEqual([
    "ShellResult",
    true,
    false,
    [{ name: "replmcp-tiny", before: null, after: "0.1.0" }],
    [],
  ]);
  const log = await cell("r.stdout");
  expect(log.value).toContain("Looking in links");
  expect(log.value).not.toContain("Looking in indexes");
  // Installed into the running interpreter: importable at once, no reset needed.
  expect((await cell("import replmcp_tiny\nreplmcp_tiny.VERSION")).value).toBe("0.1.0");

  await makeWheel("replmcp-tiny", "0.2.0");
  const upgraded = await cell(
    `r = pip_install('replmcp-tiny', upgrade=True, find_links=[${JSON.stringify(wheels)}])\n[r.changed, r.needs_reset]`,
  );
  expect(upgraded.value).toEqual([
    [{ name: "replmcp-tiny", before: "0.1.0", after: "0.2.0" }],
    ["replmcp_tiny"],
  ]);
  // The imported module keeps its old code until the worker restarts.
  expect((await cell("replmcp_tiny.VERSION")).value).toBe("0.1.0");
  expect((await cell("import replmcp_tiny\nreplmcp_tiny.VERSION", { reset: true })).value).toBe("0.2.0");

  // A requirement the wheel directory cannot satisfy fails at once: no index is asked.
  const absent = await cell(
    [
      "try:",
      `    pip_install('replmcp-absent', find_links=${JSON.stringify(wheels)})`,
      "except Exception as exc:",
      "    failure = exc",
      "[type(failure).__name__, str(failure), failure.result.returncode, failure.result.changed,",
      " 'No matching distribution found for replmcp-absent' in failure.result.stderr]",
    ].join("\n"),
  );
  expect(absent.value).toEqual([
    "InstallError",
    "Install exited with status 1; inspect exception.stderr",
    1,
    [],
    true,
  ]);
});

real("bad arguments are refused before anything runs", async () => {
  const cell = await sessionOn(withPip);
  const refusals = await cell(
    [
      "out = []",
      "for args, kwargs in [((), {}), (('--user',), {}), (('x',), {'upgrade': 'yes'}), (('x',), {'find_links': 3})]:",
      "    try:",
      "        pip_install(*args, **kwargs)",
      "    except (TypeError, ValueError) as exc:",
      "        out.append(str(exc))",
      "out",
    ].join("\n"),
  );
  expect(refusals.value).toEqual([
    "pip_install() needs at least one requirement, e.g. pip_install('requests')",
    "pip_install() requirement '--user' looks like an option; use upgrade=, index_url= or find_links=",
    "pip_install() upgrade must be True or False",
    "pip_install() find_links must be a path, a URL or a list of them",
  ]);
});

real("an interpreter without pip, and no uv on PATH, is refused with what to do", async () => {
  const cell = await sessionOn(withoutPip);
  const python = join(withoutPip, ".venv", "bin", "python");
  const refused = await cell(`pip_install('replmcp-tiny', find_links=${JSON.stringify(wheels)})`);
  expect(refused.success).toBe(false);
  expect(refused.error).toContain(
    `RuntimeError: Cannot install into ${python}: it has no pip and uv is not on PATH; nothing was installed.`,
  );
  expect(refused.error).toContain("ensurepip");
  expect((await cell("import importlib.util\nimportlib.util.find_spec('replmcp_tiny') is None")).value).toBe(
    true,
  );
});

real("with uv on PATH, uv pip install --python sys.executable is what runs", async () => {
  // A stand-in for uv (NOT uv, which is not installable here): it records its arguments, then does the
  // install with the target interpreter's pip, so the result is real.
  const bin = join(dir, "uv-bin");
  const argvLog = join(dir, "uv-argv.json");
  mkdirSync(bin);
  writeFileSync(
    join(bin, "uv"),
    [
      `#!${SYSTEM_PYTHON}`,
      "import json, os, sys",
      `json.dump(sys.argv[1:], open(${JSON.stringify(argvLog)}, 'w'))`,
      "args = sys.argv[1:]",
      "assert args[:3] == ['pip', 'install', '--python'], args",
      "os.execv(args[3], [args[3], '-m', 'pip', 'install', *args[4:]])",
    ].join("\n"),
  );
  chmodSync(join(bin, "uv"), 0o755);
  await makeWheel("replmcp-other", "1.0");
  const cell = await sessionOn(withPip, { ...OFFLINE, PATH: bin });
  const installed = await cell(`pip_install('replmcp-other', find_links=${JSON.stringify(wheels)}).changed`);
  expect(installed.value).toEqual([{ name: "replmcp-other", before: null, after: "1.0" }]);
  expect(JSON.parse(readFileSync(argvLog, "utf8"))).toEqual([
    "pip",
    "install",
    "--python",
    join(withPip, ".venv", "bin", "python"),
    "--find-links",
    wheels,
    "--no-index",
    "replmcp-other",
  ]);
});
