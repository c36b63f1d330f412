// Contained sessions (--sandbox, issue 45) behave as uncontained ones do: a plot and a DataFrame preview
// (Debian's matplotlib and pandas), mcp.<server>.<tool>() with and without approval, sh() and a fresh
// file run (contained too), a timeout (a cell stuck in C is killed with its sandbox), reset and close;
// and whatever ends a server (its client closing stdin, kill -9) leaves no process, no proxy socket,
// no worker directory and no placeholder file behind. A server that cannot contain does not start:
// bwrap missing from PATH, a bad policy file; the registry and the kernels file cannot turn it off.
// Each server here has a TMPDIR of its own, so its sandbox directory is its own to look at.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import {
  BINARY,
  Harness,
  pidAlive,
  type ServerOptions,
  SessionClient,
  STUCK_IN_C,
  taggedPids,
  tempDir,
  waitFor,
} from "../support/harness.ts";
import { homeEnv } from "../support/home.ts";
import { PeerCalls } from "../support/peer-calls.ts";
import { run } from "../support/run.ts";
import { sandboxMissing } from "../support/sandbox.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";
const reason = sandboxMissing();
if (reason) console.warn(`skipping the contained session tests: ${reason}`);
const scientific = Bun.spawnSync([
  SYSTEM_PYTHON,
  "-c",
  "import importlib.util as u, sys; sys.exit(not (u.find_spec('matplotlib') and u.find_spec('pandas')))",
]).success
  ? undefined
  : `${SYSTEM_PYTHON} cannot import matplotlib and pandas (install python3-matplotlib and python3-pandas)`;
if (!reason && scientific) console.warn(`skipping the contained plot and DataFrame test: ${scientific}`);

const SECRET = "contained-cells-never-read-this";

/** Directories a test made, removed after the file. */
const made: string[] = [];
afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function madeDir(): string {
  const dir = tempDir();
  made.push(dir);
  return dir;
}

/** The sandbox directory of a server started with TMPDIR=`tmp`: every worker's own directory is in it. */
function sandboxDirectory(tmp: string): string {
  return join(tmp, `repl-mcp-sandbox-${process.getuid?.() ?? "user"}`);
}

/** Worker directories (w-*) and every socket under a sandbox directory. */
function leftIn(directory: string): { workers: string[]; sockets: string[] } {
  if (!existsSync(directory)) return { workers: [], sockets: [] };
  const sockets: string[] = [];
  const walk = (path: string) => {
    for (const name of readdirSync(path)) {
      const full = join(path, name);
      const stat = statSync(full, { throwIfNoEntry: false });
      if (stat?.isSocket()) sockets.push(full);
      else if (stat?.isDirectory()) walk(full);
    }
  };
  walk(directory);
  return { workers: readdirSync(directory).filter((name) => name.startsWith("w-")), sockets };
}

/** A credential in a server's home, which no contained cell may read. */
function plantKey(home: string): void {
  mkdirSync(join(home, ".ssh"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home, ".ssh", "id_ed25519"), SECRET, { mode: 0o600 });
}

/** Statements that end with `found`: what a cell is refused reading the credential, and where its TMPDIR is. */
const CONTAINED = [
  "import os, tempfile",
  "try:",
  "    open(os.path.expanduser('~/.ssh/id_ed25519')).read()",
  "    read = 'read'",
  "except OSError as e:",
  "    read = type(e).__name__",
  "found = [read, os.path.basename(os.path.dirname(tempfile.gettempdir()))[:2]]",
].join("\n");
const REFUSED = ["FileNotFoundError", "w-"];

/** A contained server (Harness) with a credential in its home and a TMPDIR of its own. */
async function startContained(options: ServerOptions = {}): Promise<{ harness: Harness; tmp: string }> {
  // Short: a longer sandbox directory would move to /tmp (a socket's path is at most 108 bytes).
  const tmp = tempDir("sb-");
  const harness = await Harness.start({
    ...options,
    args: ["--sandbox", ...(options.args ?? [])],
    env: { TMPDIR: tmp, ...options.env },
    beforeStart: (project) => {
      plantKey(join(project, "..", "home"));
      options.beforeStart?.(project);
    },
  });
  return { harness, tmp };
}

async function stopContained({ harness, tmp }: { harness: Harness; tmp: string }): Promise<void> {
  await harness.close();
  rmSync(tmp, { recursive: true, force: true });
}

describe.skipIf(reason !== undefined)("sessions of a contained server", () => {
  const calls = new PeerCalls();
  let contained: { harness: Harness; tmp: string } | undefined;
  let server: Harness;
  let tmp: string;
  /** How the test now running answers approval forms. */
  let decision = "deny";

  beforeAll(async () => {
    contained = await startContained({
      capabilities: { elicitation: { form: {} } },
      beforeConnect: (client: Client) => {
        client.setRequestHandler("elicitation/create", async () => ({
          action: "accept",
          content: { decision },
        }));
      },
    });
    ({ harness: server, tmp } = contained);
  });
  afterAll(async () => {
    if (contained) await stopContained(contained);
    calls.remove();
  });

  async function open(options: Parameters<typeof SessionClient.open>[1] = {}) {
    return await SessionClient.open(server, options);
  }

  test("a plot and a DataFrame preview", async () => {
    if (scientific) return;
    const seat = await open({ python: SYSTEM_PYTHON });
    try {
      const plotted = await seat.call("execute_python", {
        code: "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()",
      });
      expect(plotted.structuredContent.success).toBe(true);
      const images = (plotted.content as { type: string; mimeType?: string }[]).filter(
        (block) => block.type === "image",
      );
      expect(images.map((image) => image.mimeType)).toEqual(["image/png"]);
      const frame = await seat.run(
        "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.2]})",
      );
      expect(frame.value_info).toMatchObject({
        type: "pandas.DataFrame",
        shape: [2, 2],
        columns: ["city", "temp"],
      });
      expect(frame.return_value).toContain("pandas.DataFrame 2 rows × 2 columns");
      expect((await seat.run(`${CONTAINED}\nfound`)).value).toEqual(REFUSED);
    } finally {
      await seat.close();
    }
  }, 120_000);

  test("mcp.<server>.<tool>() without and with approval", async () => {
    const seat = await open({
      beforeOpen: (project) =>
        writeFileSync(
          join(project, ".mcp.json"),
          JSON.stringify({ mcpServers: { typed: calls.entry({ approve: ["create_*"] }) } }),
        ),
    });
    try {
      decision = "allow_once";
      const called = await seat.run(
        "a = mcp.typed.read_file(path='README.md')\nb = mcp.typed.create_issue(title='from a contained cell')\n[type(a).__name__, type(b).__name__]",
      );
      if (!called.success) throw new Error(`${called.error}\n${called.stderr}`);
      expect(calls.tools()).toEqual(["read_file", "create_issue"]);
      decision = "deny";
      const denied = await seat.run(
        "try:\n    mcp.typed.create_issue(title='no')\nexcept mcp.McpToolError as e:\n    out = e.code\nout",
      );
      expect(denied.value).toBe("APPROVAL_DENIED");
      expect(calls.tools()).toEqual(["read_file", "create_issue"]);
    } finally {
      await seat.close();
    }
  }, 60_000);

  test("sh() and a fresh file run are contained too", async () => {
    const seat = await open({
      beforeOpen: (project) => writeFileSync(join(project, "job.py"), `${CONTAINED}\nprint(found)`),
    });
    try {
      const shell = await seat.run(
        "r = sh('cat ~/.ssh/id_ed25519; echo status=$?', check=False)\n[r.stdout, 'Permission denied' in r.stderr or 'No such file' in r.stderr]",
      );
      expect(shell.value).toEqual(["status=1\n", true]);
      expect(JSON.stringify(shell)).not.toContain(SECRET);
      const file = await seat.call("python_execute_file", {
        path: "job.py",
        mode: "fresh",
      });
      expect(file.structuredContent.success).toBe(true);
      expect(file.structuredContent.stdout).toBe(
        `${JSON.stringify(REFUSED).replaceAll('"', "'").replace(",", ", ")}\n`,
      );
    } finally {
      await seat.close();
    }
  }, 60_000);

  test("a timeout kills a cell stuck in C with its sandbox; reset starts a contained worker again; close leaves nothing", async () => {
    const sandbox = sandboxDirectory(tmp);
    const before = leftIn(sandbox).workers;
    const seat = await open();
    const pids = () => new Set(taggedPids(server.tag));
    const serverOnly = pids();
    expect((await seat.run(`${CONTAINED}\nfound`)).value).toEqual(REFUSED);
    const first = leftIn(sandbox).workers.filter((name) => !before.includes(name));
    expect(first).toHaveLength(1);
    const stuck = await seat.run(STUCK_IN_C, { timeout: 1 });
    expect(stuck.success).toBe(false);
    expect(stuck.error_code).toBe("TIMEOUT");
    await waitFor(() => !leftIn(sandbox).workers.includes(first[0] as string), {
      timeoutMs: 10_000,
      what: "the killed worker's directory to go",
    });
    // The next cell gets a new contained worker.
    expect((await seat.run(`x = 1\n${CONTAINED}\nfound`)).value).toEqual(REFUSED);
    const reset = await seat.run(`${CONTAINED}\nfound + [globals().get('x')]`, { reset: true });
    expect(reset.value).toEqual([...REFUSED, null]);
    expect(reset.state_reset).toBe(true);
    await seat.close();
    await waitFor(() => [...pids()].every((pid) => serverOnly.has(pid)), {
      timeoutMs: 10_000,
      what: "the session's processes to end",
    });
    expect(leftIn(sandbox).workers.filter((name) => !before.includes(name))).toEqual([]);
  }, 90_000);
});

/** A contained server driven over raw stdio, so a test can close its stdin or kill it itself. */
async function rawContained(dir: string) {
  const home = join(dir, "home");
  const tmp = tempDir("sb-");
  made.push(tmp);
  const project = join(dir, "project");
  plantKey(home);
  mkdirSync(project);
  Bun.spawnSync(["git", "init", "-q", project]);
  const tag = crypto.randomUUID();
  const proc = Bun.spawn([BINARY, "--sandbox"], {
    cwd: project,
    env: { ...homeEnv(home), TMPDIR: tmp, REPL_MCP_TEST_TAG: tag },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  void new Response(proc.stderr).text();
  const answers = new Map<number, any>();
  void (async () => {
    let buffered = "";
    for await (const chunk of proc.stdout) {
      buffered += new TextDecoder().decode(chunk);
      for (let end = buffered.indexOf("\n"); end !== -1; end = buffered.indexOf("\n")) {
        const message = JSON.parse(buffered.slice(0, end));
        buffered = buffered.slice(end + 1);
        if (message.id !== undefined) answers.set(message.id, message);
      }
    }
  })();
  const send = (message: unknown) => {
    proc.stdin.write(`${JSON.stringify(message)}\n`);
    void proc.stdin.flush();
  };
  const answer = async (id: number) => {
    await waitFor(() => answers.has(id), { timeoutMs: 30_000, what: `answer ${id}` });
    return answers.get(id);
  };
  send({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
  });
  await answer(1);
  send({ jsonrpc: "2.0", method: "notifications/initialized" });
  const cell = (id: number, code: string) =>
    send({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "execute_python", arguments: { code } },
    });
  return { proc, tag, project, tmp, cell, answer };
}

describe.skipIf(reason !== undefined)("a contained server's end", () => {
  /** What each way of ending left in its project besides what the cell made. */
  const leftInProject = new Map<string, string[]>();

  test.each(["its client closes stdin", "it is killed with SIGKILL"])(
    "%s: no process, proxy socket or worker directory is left",
    async (how) => {
      const server = await rawContained(madeDir());
      const before = readdirSync(server.project);
      // A worker with a detached child of its own.
      server.cell(
        2,
        "import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True)\nopen('made-by-the-cell', 'w').write('x')\n1",
      );
      expect((await server.answer(2)).result.structuredContent.value).toBe(1);
      const sandbox = sandboxDirectory(server.tmp);
      expect(leftIn(sandbox).workers).toHaveLength(1);
      expect(leftIn(sandbox).sockets.length).toBeGreaterThan(0);
      // The runtime's placeholders of protected names (.mcp.json, .bashrc, ...) while the worker lives.
      expect(readdirSync(server.project)).toContain(".mcp.json");
      const pids = taggedPids(server.tag);
      if (how.includes("stdin")) {
        server.proc.stdin.end();
        expect(await server.proc.exited).toBe(0);
      } else {
        server.proc.kill("SIGKILL");
        await server.proc.exited;
      }
      await waitFor(() => pids.every((pid) => !pidAlive(pid)) && taggedPids(server.tag).length === 0, {
        timeoutMs: 10_000,
        what: "every process of the server to end",
      });
      await waitFor(() => leftIn(sandbox).workers.length === 0 && leftIn(sandbox).sockets.length === 0, {
        timeoutMs: 10_000,
        what: `the sandbox directory to be empty: ${JSON.stringify(leftIn(sandbox))}`,
      });
      const left = readdirSync(server.project).filter(
        (name) => !before.includes(name) && name !== "made-by-the-cell",
      );
      leftInProject.set(how, left);
      // Whatever is left is an empty placeholder: nothing a cell wrote.
      for (const name of left) {
        const path = join(server.project, name);
        expect(statSync(path).isDirectory() ? readdirSync(path).length : statSync(path).size).toBe(0);
      }
    },
    60_000,
  );

  test("a server whose client closed stdin removes the runtime's placeholders", () => {
    expect(leftInProject.get("its client closes stdin")).toEqual([]);
  });

  // Not yet: the runtime keeps the list of its placeholders in the server's memory, and a server killed
  // with SIGKILL leaves them (empty read-only files and directories: .mcp.json, .bashrc, .vscode, ...).
  test.failing("a server killed with SIGKILL leaves no placeholder either", () => {
    expect(leftInProject.get("it is killed with SIGKILL")).toEqual([]);
  });
});

describe.skipIf(reason !== undefined)("a server that cannot contain does not start", () => {
  /** The binary's exit status and stderr, started with `args` and `env` in a fresh project. */
  async function refused(args: string[], env: Record<string, string> = {}, prepare?: (dir: string) => void) {
    const dir = madeDir();
    mkdirSync(join(dir, "home"));
    prepare?.(dir);
    const result = await run([BINARY, ...args], {
      cwd: dir,
      env: { ...homeEnv(join(dir, "home")), ...env },
      // stdin stays open: a server that started would serve and never exit.
      stdin: "pipe",
      timeoutMs: 30_000,
    });
    return { code: result.code, lines: result.stderr.trimEnd().split("\n") };
  }

  test("without bwrap on PATH: one line saying what to install, exit status 1", async () => {
    const bin = madeDir();
    for (const program of ["python3", "socat", "rg", "setpriv", "sh"]) {
      const found = Bun.which(program);
      if (found) symlinkSync(found, join(bin, program));
    }
    const { code, lines } = await refused(["--sandbox"], { PATH: bin });
    expect(code).toBe(1);
    expect(lines).toEqual([
      "repl-mcp: error: --sandbox cannot contain cells here: bwrap not found; install bubblewrap, socat and ripgrep (Debian, Ubuntu: apt-get install bubblewrap socat ripgrep)",
    ]);
  });

  test("a bad policy file stops the server naming the field, from --sandbox FILE and REPL_MCP_SANDBOX", async () => {
    const write = (body: unknown) => (dir: string) =>
      writeFileSync(join(dir, "policy.json"), JSON.stringify(body));
    const unknown = await refused(
      ["--sandbox", "policy.json"],
      {},
      write({ network: { allowedHosts: ["x.org"] } }),
    );
    expect(unknown.code).toBe(1);
    expect(unknown.lines).toHaveLength(1);
    expect(unknown.lines[0]).toContain('unknown field "network.allowedHosts"');
    const pattern = await refused(
      [],
      { REPL_MCP_SANDBOX: "policy.json" },
      write({ network: { allowedDomains: ["*"] } }),
    );
    expect(pattern.code).toBe(1);
    expect(pattern.lines).toHaveLength(1);
    expect(pattern.lines[0]).toContain('"network.allowedDomains.0": Invalid domain pattern');
  });

  test("the registry and the kernels file cannot turn containment off", async () => {
    const kernels = await refused(["--sandbox", "--kernels", "kernels.json"], {}, (dir) =>
      writeFileSync(
        join(dir, "kernels.json"),
        JSON.stringify({ kernelServers: { lab: { url: "http://127.0.0.1:9/", sandbox: false } } }),
      ),
    );
    expect(kernels.code).toBe(1);
    expect(kernels.lines[0]).toContain('unknown field "sandbox"');

    const server = await startContained({
      beforeStart: (project) =>
        writeFileSync(join(project, ".mcp.json"), JSON.stringify({ sandbox: false, mcpServers: {} })),
    });
    try {
      expect((await server.harness.health()).server.sandbox).toMatchObject({ contained: true });
      expect((await server.harness.run(`${CONTAINED}\nfound`)).value).toEqual(REFUSED);
    } finally {
      await stopContained(server);
    }
  }, 60_000);
});
