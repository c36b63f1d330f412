// Escape attempts from a contained cell (--sandbox, issue 45): each is refused, as the cell sees it (its
// error, its sandbox_denials) and as the host shows it (the file unchanged or absent, nothing reached the
// listener). Each attempt runs unchanged on a server without --sandbox too, where it succeeds: the fault
// the sandbox is there to stop. Two pairs of servers (contained and not) serve every test of the file:
// one over HTTP (its port and generated token are targets) with a journal, a kernels file and a project
// registry; one over stdio with a --config registry. Without bubblewrap or network namespaces the tests
// skip and say why.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { TCPSocketListener } from "bun";
import { Harness, pidAlive, tempDir } from "../support/harness.ts";
import { type HttpClient, HttpServer } from "../support/http.ts";
import { type HostedHttp, netnsMissing, SecondHost } from "../support/netns.ts";
import { PeerCalls } from "../support/peer-calls.ts";
import { sandboxMissing } from "../support/sandbox.ts";

const reason = sandboxMissing() ?? netnsMissing();
if (reason) console.warn(`skipping the sandbox escape tests: ${reason}`);

const SSH_KEY = "ssh-private-key-must-stay-home";
const OAUTH_SECRET = "oauth-refresh-token-must-stay-home";
const KERNEL_TOKEN = "kernel-token-must-stay-home";
const BASHRC = "# the person's own .bashrc\n";
const REGISTRY_SECRET = "registry-header-secret";

/** One server as a test drives it: contained or not, and where its secrets are. */
interface Seat {
  contained: boolean;
  /** "open" or "contained": names what the seat leaves on shared listeners. */
  label: string;
  home: string;
  project: string;
  serverPid: number;
  tag: string;
  /** The server's HTTP port and generated token file (the HTTP pair only). */
  port?: number;
  tokenFile?: string;
  token?: string;
  /** The --config registry (the stdio pair only). */
  registry?: string;
  run(code: string): Promise<Record<string, any>>;
}

/** The person's home: credentials, a shell start file, a kernels file with a token file. */
function plantHome(home: string): void {
  mkdirSync(join(home, ".ssh"), { mode: 0o700 });
  writeFileSync(join(home, ".ssh", "id_ed25519"), SSH_KEY, { mode: 0o600 });
  writeFileSync(join(home, ".bashrc"), BASHRC);
  writeFileSync(join(home, "lab.token"), KERNEL_TOKEN, { mode: 0o600 });
  writeFileSync(
    join(home, "kernels.json"),
    JSON.stringify({ kernelServers: { lab: { url: "http://127.0.0.1:9/", tokenFile: "lab.token" } } }),
  );
}

const calls = new PeerCalls();
let host: SecondHost | undefined;
let root: string | undefined;
let web: HostedHttp;
let listener: TCPSocketListener | undefined;
/** Connections the loopback listener accepted, by the first bytes they sent. */
const accepted: string[] = [];
const servers: HttpServer[] = [];
const harnesses: Harness[] = [];
let http: Promise<[Seat, Seat]> | undefined;
let stdio: Promise<[Seat, Seat]> | undefined;

beforeAll(async () => {
  if (reason) return;
  host = await SecondHost.create({ range: "198.18.0.0" });
  root = tempDir("repl-mcp-escapes-web-");
  web = await host.serve(root);
  listener = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data: (_socket, bytes) => {
        accepted.push(Buffer.from(bytes).toString());
      },
    },
  });
});

afterAll(async () => {
  for (const server of servers) await server.stop();
  for (const harness of harnesses) await harness.close();
  listener?.stop(true);
  await web?.stop();
  await host?.destroy();
  if (root) rmSync(root, { recursive: true, force: true });
  calls.remove();
});

async function httpSeat(contained: boolean): Promise<Seat> {
  let home = "";
  const server = await HttpServer.start(
    [
      ...(contained ? ["--sandbox"] : []),
      "--journal",
      "../home/journal.json",
      "--kernels",
      "../home/kernels.json",
    ],
    {},
    (project) => {
      home = join(dirname(project), "home");
      plantHome(home);
      mkdirSync(join(project, "creds"));
      writeFileSync(join(project, "creds", "remote.json"), JSON.stringify({ refresh_token: OAUTH_SECRET }), {
        mode: 0o600,
      });
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({
          mcpServers: {
            typed: calls.entry(),
            remote: {
              type: "http",
              url: "http://127.0.0.1:9/mcp",
              oauth: { clientId: "repl-mcp", credentialFile: "creds/remote.json" },
            },
          },
        }),
      );
      Bun.spawnSync(["git", "init", "-q", project]);
    },
  );
  servers.push(server);
  const client: HttpClient = await server.connect();
  return {
    contained,
    label: contained ? "contained" : "open",
    home,
    project: server.project,
    serverPid: server.proc.pid,
    tag: server.tag,
    port: Number(new URL(server.url).port),
    tokenFile: server.tokenFile,
    token: server.token,
    run: (code) => client.run(code),
  };
}

async function stdioSeat(contained: boolean): Promise<Seat> {
  let home = "";
  let registry = "";
  const harness = await Harness.start({
    args: [...(contained ? ["--sandbox"] : []), "--config", "../home/registry.json"],
    beforeStart: (project) => {
      home = join(dirname(project), "home");
      plantHome(home);
      registry = join(home, "registry.json");
      writeFileSync(
        registry,
        JSON.stringify({
          mcpServers: {
            remote: {
              url: "http://127.0.0.1:9/mcp",
              headers: { authorization: `Bearer ${REGISTRY_SECRET}` },
            },
          },
        }),
      );
    },
  });
  harnesses.push(harness);
  return {
    contained,
    label: contained ? "contained" : "open",
    home,
    project: harness.project,
    serverPid: harness.serverPid,
    tag: harness.tag,
    registry,
    run: (code) => harness.run(code),
  };
}

/** The file's servers of one kind, without and with --sandbox, started once (both at once). */
function pair(kind: "http" | "stdio"): Promise<[Seat, Seat]> {
  if (kind === "http") {
    http ??= Promise.all([httpSeat(false), httpSeat(true)]);
    return http;
  }
  stdio ??= Promise.all([stdioSeat(false), stdioSeat(true)]);
  return stdio;
}

type Result = Record<string, any>;

interface Escape {
  /** The pair it runs on (default: http). */
  on?: "stdio";
  code(seat: Seat): string;
  /** Without the sandbox: it worked, and the host shows it. */
  open(result: Result, seat: Seat): void;
  /** Contained: refused, and the host shows nothing happened. */
  refused(result: Result, seat: Seat): void;
}

/** A cell's denials as "kind target". */
function denials(result: Result): string[] {
  return (result.sandbox_denials ?? []).map((denial: { kind: string; target: string }) => {
    return `${denial.kind} ${denial.target}`;
  });
}

/** The last line of the error a cell ended with: the exception and its message. */
function raised(result: Result): string {
  return (
    String(result.error ?? "")
      .trim()
      .split("\n")
      .pop() ?? ""
  );
}

function succeeded(result: Result): void {
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
}

/** A cell that reads `path`: the secret without the sandbox; contained, the cell ends with the read refused. */
function reading(path: (seat: Seat) => string, secret: (seat: Seat) => string, before = ""): Escape {
  return {
    code: (seat) => `${before}open(${JSON.stringify(path(seat))}).read()`,
    open: (result, seat) => {
      succeeded(result);
      expect(result.value).toContain(secret(seat));
    },
    refused: (result, seat) => {
      expect(result.success).toBe(false);
      expect(raised(result)).toMatch(/^(PermissionError|FileNotFoundError)/);
      expect(JSON.stringify(result)).not.toContain(secret(seat));
      expect(denials(result)).toContain(`read ${path(seat)}`);
    },
  };
}

/** A cell that writes `path` (`target`: the file the host would see changed); contained, it stays as it was. */
function writing(path: (seat: Seat) => string, target: (seat: Seat) => string = path, before = ""): Escape {
  const snapshots = new Map<Seat, string | undefined>();
  const read = (file: string) => (existsSync(file) ? readFileSync(file, "utf8") : undefined);
  return {
    code: (seat) => {
      snapshots.set(seat, read(target(seat)));
      return `${before}open(${JSON.stringify(path(seat))}, "a").write("\\necho escaped-${seat.label}\\n")`;
    },
    open: (result, seat) => {
      succeeded(result);
      expect(read(target(seat))).toContain(`echo escaped-${seat.label}`);
    },
    refused: (result, seat) => {
      expect(result.success).toBe(false);
      expect(raised(result)).toMatch(/^(PermissionError|OSError|FileNotFoundError)/);
      const now = read(target(seat));
      // A file that did not exist may be the runtime's empty placeholder while the worker lives.
      if (snapshots.get(seat) === undefined) expect(now === undefined || now === "").toBe(true);
      else expect(now).toBe(snapshots.get(seat));
      expect(denials(result)).toContain(`write ${target(seat)}`);
    },
  };
}

const ESCAPES: Record<string, Escape> = {
  "read ~/.ssh/id_ed25519": reading(
    (seat) => join(seat.home, ".ssh", "id_ed25519"),
    () => SSH_KEY,
  ),
  "read the registry's OAuth credential file": reading(
    (seat) => join(seat.project, "creds", "remote.json"),
    () => OAUTH_SECRET,
  ),
  "read the HTTP token file": reading(
    (seat) => seat.tokenFile as string,
    (seat) => seat.token as string,
  ),
  "read the kernels file's tokenFile": reading(
    (seat) => join(seat.home, "lab.token"),
    () => KERNEL_TOKEN,
  ),
  // A brokered call first: the journal is then rewritten while the worker runs.
  "read the --journal file after a call": reading(
    (seat) => join(seat.home, "journal.json"),
    () => '"server": "typed"',
    "mcp.typed.read_file(path='README')\n",
  ),
  "write ~/.bashrc": writing((seat) => join(seat.home, ".bashrc")),
  "write the project's .mcp.json": writing((seat) => join(seat.project, ".mcp.json")),
  "write a .mcp.json the project does not have": {
    ...writing((seat) => join(seat.project, ".mcp.json")),
    on: "stdio",
  },
  "write the --config registry": {
    ...writing((seat) => seat.registry as string),
    on: "stdio",
  },
  "write .git/hooks/pre-commit": writing(
    (seat) => join(seat.project, ".git", "hooks", "pre-commit"),
    undefined,
    "import os\nos.makedirs('.git/hooks', exist_ok=True)\n",
  ),
  "read ~/.ssh through a link planted in the project": reading(
    (seat) => join(seat.home, ".ssh", "id_ed25519"),
    () => SSH_KEY,
    "import os\nos.symlink(os.path.expanduser('~/.ssh'), 'ssh-link')\nopen('ssh-link/id_ed25519').read()\n",
  ),
  "write ~/.bashrc through a link planted in the project": writing(
    () => "rc-link",
    (seat) => join(seat.home, ".bashrc"),
    "import os\nos.symlink(os.path.expanduser('~/.bashrc'), 'rc-link')\n",
  ),
  "read /proc/<server pid>/environ": {
    code: (seat) => `open('/proc/${seat.serverPid}/environ', 'rb').read().decode('latin-1')`,
    open: (result, seat) => {
      succeeded(result);
      expect(result.value).toContain(`REPL_MCP_TEST_TAG=${seat.tag}`);
    },
    refused: (result, seat) => {
      expect(result.success).toBe(false);
      expect(JSON.stringify(result)).not.toContain(seat.tag);
      expect(pidAlive(seat.serverPid)).toBe(true);
    },
  },
  "list ~/.ssh through /proc/<server pid>/root": {
    code: (seat) => `import os\nos.listdir('/proc/${seat.serverPid}/root${seat.home}/.ssh')`,
    open: (result) => {
      succeeded(result);
      expect(result.value).toEqual(["id_ed25519"]);
    },
    refused: (result) => {
      expect(result.success).toBe(false);
      expect(raised(result)).toMatch(/^(PermissionError|FileNotFoundError)/);
    },
  },
  // With the server's token, its own port would run code outside the sandbox: here, a file in its home.
  "run code through the server's HTTP port": {
    code: (seat) =>
      [
        "import json, os, urllib.request",
        "direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))",
        `url = 'http://127.0.0.1:${seat.port}/mcp'`,
        `headers = {'authorization': 'Bearer ${seat.token}', 'content-type': 'application/json', 'accept': 'application/json, text/event-stream'}`,
        "def post(body, session=None):",
        "    extra = {'mcp-session-id': session} if session else {}",
        "    request = urllib.request.Request(url, json.dumps(body).encode(), {**headers, **extra})",
        "    with direct.open(request, timeout=30) as response:",
        "        return response.headers.get('mcp-session-id'), response.read()",
        "session, _ = post({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'cell', 'version': '0'}}})",
        "post({'jsonrpc': '2.0', 'method': 'notifications/initialized'}, session)",
        `marker = ${JSON.stringify(join(seat.home, "escaped-through-the-port"))}`,
        "post({'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call', 'params': {'name': 'execute_python', 'arguments': {'code': 'open(%r, \"w\").write(\"x\")' % marker}}}, session)[1].decode()",
      ].join("\n"),
    open: (result, seat) => {
      succeeded(result);
      expect(existsSync(join(seat.home, "escaped-through-the-port"))).toBe(true);
    },
    refused: (result, seat) => {
      expect(result.success).toBe(false);
      expect(raised(result)).toMatch(/ConnectionRefusedError|Connection refused/);
      expect(existsSync(join(seat.home, "escaped-through-the-port"))).toBe(false);
    },
  },
  "connect to a listener on this host's loopback": {
    code: (seat) =>
      `import socket\nwith socket.create_connection(('127.0.0.1', ${listener?.port}), timeout=10) as s:\n    s.sendall(b'loopback-${seat.label}')\nNone`,
    open: (result) => {
      succeeded(result);
      expect(accepted).toContain("loopback-open");
    },
    refused: (result) => {
      expect(result.success).toBe(false);
      expect(raised(result)).toStartWith("ConnectionRefusedError");
      expect(accepted.filter((bytes) => bytes.includes("contained"))).toEqual([]);
    },
  },
  "connect to a raw IP outside": {
    code: (seat) =>
      [
        "import socket",
        `with socket.create_connection((${JSON.stringify(web.address)}, ${web.port}), timeout=10) as s:`,
        `    s.sendall(b'GET /raw-${seat.label} HTTP/1.0\\r\\nHost: raw\\r\\n\\r\\n')`,
        "    s.recv(64).decode()",
      ].join("\n"),
    open: (result) => {
      succeeded(result);
      expect(web.received("/raw-open")).toHaveLength(1);
    },
    refused: (result) => {
      expect(result.success).toBe(false);
      expect(raised(result)).toMatch(/^OSError: \[Errno 101\]/);
      expect(web.received("/raw-contained")).toEqual([]);
      expect(denials(result)).toContain(`network ${web.address}:${web.port}`);
    },
  },
  // In a child: a worker that moved itself into a namespace of its own would be lost to the test.
  "unshare a namespace of its own": {
    code: () =>
      [
        "import subprocess, sys",
        "child = '''",
        "import ctypes, os",
        "CLONE_NEWUSER = 0x10000000",
        "if hasattr(os, 'unshare'):",
        "    os.unshare(os.CLONE_NEWUSER)",
        "elif ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER) != 0:",
        "    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))",
        "'''",
        "flags = ('-U', '-n', '-m', '-i', '-u', '-C')",
        "codes = [subprocess.run(['unshare', flag, 'true'], capture_output=True).returncode for flag in flags]",
        "codes + [subprocess.run([sys.executable, '-c', child], capture_output=True).returncode]",
      ].join("\n"),
    open: (result) => {
      succeeded(result);
      expect(result.value).toEqual([0, 0, 0, 0, 0, 0, 0]);
    },
    refused: (result) => {
      succeeded(result);
      expect(result.value).toEqual([1, 1, 1, 1, 1, 1, 1]);
    },
  },
  "curl a host nobody allowed": {
    code: (seat) =>
      `import subprocess\nsubprocess.run(['curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', '${web.origin}/curl-${seat.label}'], capture_output=True, text=True, timeout=60).stdout`,
    open: (result) => {
      succeeded(result);
      expect(result.value).toBe("404");
      expect(web.received("/curl-open")).toHaveLength(1);
    },
    refused: (result) => {
      succeeded(result);
      expect(result.value).toBe("403");
      expect(web.received("/curl-contained")).toEqual([]);
      expect(denials(result)).toContain(`network ${web.address}:${web.port}`);
    },
  },
  "pip download from a host nobody allowed": {
    code: (seat) =>
      [
        "import os, subprocess, tempfile",
        "r = subprocess.run(['/usr/bin/python3', '-m', 'pip', 'download', '--no-deps', '--no-cache-dir', '--retries', '0',",
        `    '--timeout', '20', '-d', tempfile.mkdtemp(), '--index-url', '${web.origin}/simple-${seat.label}/',`,
        `    '--trusted-host', '${web.address}', 'replmcp-nothing'],`,
        "    capture_output=True, text=True, timeout=120, env={**os.environ, 'PIP_CONFIG_FILE': '/dev/null'})",
        "[r.returncode, r.stderr]",
      ].join("\n"),
    open: (result) => {
      succeeded(result);
      expect(result.value[0]).not.toBe(0);
      expect(web.received("/simple-open/"), JSON.stringify(web.requests)).not.toEqual([]);
    },
    refused: (result) => {
      succeeded(result);
      // pip reads a refused index as one without the package: its error says no more than that.
      expect(result.value[0]).not.toBe(0);
      expect(web.received("/simple-contained/")).toEqual([]);
      expect(denials(result)).toContain(`network ${web.address}:${web.port}`);
    },
  },
};

describe.skipIf(reason !== undefined)("a contained cell's escape attempts", () => {
  test.each(Object.keys(ESCAPES))(
    "%s: done without the sandbox, refused in it",
    async (name) => {
      const attempt = ESCAPES[name] as Escape;
      const [open, contained] = await pair(attempt.on ?? "http");
      const [without, within] = await Promise.all([
        open.run(attempt.code(open)),
        contained.run(attempt.code(contained)),
      ]);
      attempt.open(without, open);
      attempt.refused(within, contained);
    },
    120_000,
  );
});

// A protected file is hidden by a mount over its path, made when the worker starts, and Linux detaches that
// mount when the file is replaced on the host (git rewrites .git/config by rename, so do editors). The
// server watches what it protects (src/sandbox/watch.ts): the worker is stopped at once, and the next one
// is wrapped around the new file.
describe.skipIf(reason !== undefined)("a protected file replaced on the host while a worker lives", () => {
  test("stops the worker; the next one protects the new file", async () => {
    const [, contained] = await pair("http");
    const write = "open('.git/config', 'a').write('\\n[core]\\n\\tfsmonitor = echo escaped\\n')";
    expect(raised(await contained.run(write))).toStartWith("OSError: [Errno 30]");
    const renamed = Bun.spawnSync(["git", "-C", contained.project, "config", "user.name", "Person"]);
    expect(renamed.exitCode).toBe(0);
    // The worker that saw the old file ends: the next cell runs in a new one.
    let fresh = false;
    for (let tries = 0; tries < 100 && !fresh; tries++) {
      fresh = (await contained.run("1")).state_reset === true;
      if (!fresh) await Bun.sleep(50);
    }
    expect(fresh).toBe(true);
    expect(raised(await contained.run(write))).toStartWith("OSError: [Errno 30]");
    expect(readFileSync(join(contained.project, ".git", "config"), "utf8")).not.toContain("escaped");
  });
});
