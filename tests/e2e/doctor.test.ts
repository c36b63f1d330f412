// `repl-mcp doctor`: a report of what the server would do in a directory, each problem with its fix,
// as text or one JSON object; exit status 0 when nothing is wrong, 1 otherwise.
import { afterEach, expect, test } from "bun:test";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { BINARY, Harness, taggedPids, tempDir, waitFor } from "../support/harness.ts";
import { run } from "../support/run.ts";

const STDIO_PEER = resolve(import.meta.dir, "../fixtures/peers/stdio-peer.ts");
const ESC = "\u001b[";
const SECRET = "doctor-must-never-print-this";

const dirs: string[] = [];
const harnesses: Harness[] = [];
afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function project(servers: Record<string, unknown> | null = {}): string {
  const dir = tempDir("repl-mcp-doctor-");
  dirs.push(dir);
  mkdirSync(join(dir, "home"));
  if (servers) writeFileSync(join(dir, ".mcp.json"), JSON.stringify({ mcpServers: servers }));
  return dir;
}

const peer = { command: process.execPath, args: [STDIO_PEER] };

async function doctor(cwd: string, args: string[] = [], env: Record<string, string> = {}) {
  const tag = crypto.randomUUID();
  const result = await run([BINARY, "doctor", ...args], {
    cwd,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: join(cwd, "home"),
      REPL_MCP_TEST_TAG: tag,
      ...env,
    },
    timeoutMs: 30_000,
  });
  // Nothing it started (interpreter probes, a --connect peer) outlives it.
  await waitFor(() => taggedPids(tag).length === 0, { timeoutMs: 5_000, what: "doctor's children to exit" });
  return result;
}

async function doctorJson(cwd: string, args: string[] = [], env: Record<string, string> = {}) {
  const result = await doctor(cwd, ["--json", ...args], env);
  expect(result.stderr).toBe("");
  return { code: result.code, report: JSON.parse(result.stdout) };
}

function credentialFile(path: string, url: string, receivedAt: number, mode = 0o600, refresh = true) {
  const file = {
    server_url: url,
    client: {
      client_id: "doctor-client",
      issuer: "http://127.0.0.1:9",
      token_endpoint: "http://127.0.0.1:9/token",
    },
    token_received_at: receivedAt,
    token_response: {
      access_token: SECRET,
      token_type: "Bearer",
      expires_in: 3600,
      ...(refresh ? { refresh_token: `${SECRET}-refresh` } : {}),
    },
  };
  writeFileSync(path, JSON.stringify(file), { mode });
  chmodSync(path, mode);
}

test("a healthy setup: interpreter and why, registry source, each server's status; exit 0, no colour", async () => {
  const dir = project({ peer });
  const python = Bun.which("python3") as string;
  const { stdout, stderr, code } = await doctor(dir, ["--python", python]);
  expect(stderr).toBe("");
  expect(code).toBe(0);
  expect(stdout).toContain(`Default interpreter ${python}, Python 3.`);
  expect(stdout).toContain("(chosen by --python)");
  expect(stdout).toContain(`project: ${join(dir, ".mcp.json")}`);
  expect(stdout).toContain("peer (stdio, project): disconnected");
  expect(stdout).toContain("In memory only; pass --journal PATH");
  expect(stdout).toContain("No problems found.");
  expect(stdout).not.toContain(ESC);

  const fromEnv = await doctorJson(dir, [], { REPL_MCP_PYTHON: python });
  expect(fromEnv.code).toBe(0);
  expect(fromEnv.report.python.default).toMatchObject({ path: python, reason: "chosen by REPL_MCP_PYTHON" });
  expect(fromEnv.report.python.default.version).toMatch(/^3\.\d+\.\d+$/);
  expect(fromEnv.report.registry.servers).toEqual([
    expect.objectContaining({ name: "peer", transport: "stdio", status: "disconnected" }),
  ]);
  expect(fromEnv.report).toMatchObject({ ok: true, problems: [], journal: { durable: false } });
});

test("problems are each reported with their fix, as text and as JSON; exit 1", async () => {
  const dir = project({
    missing: { type: "http", url: "http://127.0.0.1:9/mcp", oauth: { credentialFile: "creds/missing.json" } },
    public: { type: "http", url: "http://127.0.0.1:9/mcp", oauth: { credentialFile: "creds/public.json" } },
    fine: { type: "http", url: "http://127.0.0.1:9/mcp", oauth: { credentialFile: "creds/fine.json" } },
    stale: { type: "http", url: "http://127.0.0.1:9/mcp", oauth: { credentialFile: "creds/stale.json" } },
  });
  mkdirSync(join(dir, "creds"), { mode: 0o700 });
  const now = Math.floor(Date.now() / 1000);
  credentialFile(join(dir, "creds", "public.json"), "http://127.0.0.1:9/mcp", now, 0o644);
  credentialFile(join(dir, "creds", "fine.json"), "http://127.0.0.1:9/mcp", now);
  credentialFile(join(dir, "creds", "stale.json"), "http://127.0.0.1:9/mcp", 1, 0o600, false);
  mkdirSync(join(dir, ".venv")); // a .venv without bin/python
  writeFileSync(join(dir, "journal.json"), "{not json", { mode: 0o600 });

  const text = await doctor(dir, ["--journal", "journal.json"]);
  expect(text.code).toBe(1);
  expect(text.stdout).not.toContain(SECRET);
  expect(text.stdout).toContain("Project .venv is broken");
  expect(text.stdout).toContain("fix: Repair it (python3 -m venv --clear .venv) or remove it");
  expect(text.stdout).toContain("problems found");
  // The fix names this registry and server, ready to paste.
  expect(text.stdout).toContain(`fix: Run repl-mcp --config ${join(dir, ".mcp.json")} --oauth-login missing`);

  const { code, report } = await doctorJson(dir, ["--journal", "journal.json"]);
  expect(code).toBe(1);
  expect(JSON.stringify(report)).not.toContain(SECRET);
  expect(report.ok).toBe(false);
  const byServer = Object.fromEntries(report.credentials.items.map((item: any) => [item.server, item]));
  expect(byServer.missing).toMatchObject({ present: false });
  expect(byServer.public).toMatchObject({ present: true, mode: "0644" });
  expect(byServer.fine).toMatchObject({ present: true, mode: "0600", expired: false, refreshable: true });
  expect(byServer.fine.expires_at).toBe(now + 3600);
  expect(byServer.stale).toMatchObject({ expired: true, refreshable: false });
  const statuses = Object.fromEntries(report.registry.servers.map((item: any) => [item.name, item.status]));
  expect(statuses.missing).toBe("credentials_missing");
  expect(statuses.fine).toBe("disconnected");
  expect(report.python.project_venv.state).toBe("broken");
  expect(report.journal).toMatchObject({ durable: true, path: join(dir, "journal.json") });
  expect(report.journal.error).toContain("is not a valid journal (it is not JSON)");
  const problems = report.problems.map((item: any) => `${item.section}: ${item.problem}`).join("\n");
  for (const needle of ["Project .venv is broken", "missing", "public", "stale", "not a valid journal"]) {
    expect(problems).toContain(needle);
  }
  expect(problems).not.toContain("fine");
  for (const item of report.problems) expect(item.action.length).toBeGreaterThan(0);
});

test("a registry error and a missing interpreter are problems", async () => {
  const dir = project(null);
  writeFileSync(join(dir, ".mcp.json"), "{broken");
  const { code, report } = await doctorJson(dir, ["--python", "/nonexistent/python3"]);
  expect(code).toBe(1);
  expect(report.registry.configuration_error).toContain("invalid JSON");
  expect(report.problems.map((item: any) => item.problem).join("\n")).toContain("/nonexistent/python3");
});

test("--connect lists the tools of one server, or reports why it cannot connect", async () => {
  const dir = project({ peer, broken: { command: "/nonexistent/peer" } });
  const connected = await doctorJson(dir, ["--connect", "peer"]);
  expect(connected.code).toBe(0);
  expect(connected.report.connect).toMatchObject({ server: "peer", connected: true });
  expect(connected.report.connect.tools).toContain("echo");
  const text = await doctor(dir, ["--connect", "peer"]);
  expect(text.stdout).toMatch(/Connected; \d+ tools: echo/);

  const failed = await doctorJson(dir, ["--connect", "broken"]);
  expect(failed.code).toBe(1);
  expect(failed.report.connect).toMatchObject({ server: "broken", connected: false });
  const unknown = await doctorJson(dir, ["--connect", "nosuch"]);
  expect(unknown.code).toBe(1);
  expect(unknown.report.connect.error).toContain("Unknown or unauthorized MCP server");
});

test("the journal of a running server: in use, its records and unknown outcomes", async () => {
  const dir = project({ peer });
  const journal = join(dir, "journal.json");
  const server = await Harness.start({
    args: ["--journal", journal],
    beforeStart: (p) => writeFileSync(join(p, ".mcp.json"), JSON.stringify({ mcpServers: { peer } })),
  });
  harnesses.push(server);
  const result = await server.run("mcp.call('peer', 'echo', text='x')\nNone");
  expect(result.success).toBe(true);
  const { code, report } = await doctorJson(dir, ["--journal", journal]);
  expect(code).toBe(0);
  expect(report.journal).toMatchObject({ durable: true, in_use: true, records: 1, outcome_unknown: 0 });
  // The doctor's look did not take the journal away from the server.
  expect((await server.run("mcp.call('peer', 'echo', text='y')\nlen(mcp.journal())")).value).toBe(2);
});
