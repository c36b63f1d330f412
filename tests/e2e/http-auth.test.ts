// Who may use --transport http: the token a server makes when none is given (and how a user passes it,
// down to Claude Code's own CLI), the refusals of an empty or untrustworthy token source, another local
// user kept out, the token kept from every child, and an authenticated body that cannot be dribbled forever.
// runner: waiting lane
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { dirname, join } from "node:path";
import { BINARY, Harness, REAL_PYTHON, tempDir, waitFor } from "../support/harness.ts";
import { HttpServer, INITIALIZE, post } from "../support/http.ts";
import { run } from "../support/run.ts";

const TOKEN = "s3cret-token-0123456789abcdef";
const CLAUDE = join(import.meta.dir, "../../node_modules/.bin/claude");
const STDIO_PEER = join(import.meta.dir, "../fixtures/peers/stdio-peer.ts");
const NOBODY = 65_534;

// The tests run concurrently, each with servers of its own: one waits out a body deadline of 30 s.
let servers: HttpServer[] = [];
afterAll(async () => {
  for (const server of servers) {
    // A server stuck before listening may ignore SIGTERM: never let it outlive its test.
    if (server.proc.exitCode === null && !server.url) server.proc.kill("SIGKILL");
  }
  await Promise.all(servers.map((server) => server.stop()));
  servers = [];
});

async function serve(args: string[] = [], env: Record<string, string> = {}) {
  const server = await HttpServer.start(args, env);
  servers.push(server);
  return server;
}

/** A server that must refuse to start: its exit status and stderr, or a failure if it serves instead. */
async function refusal(args: string[], env: Record<string, string> = {}) {
  const server = HttpServer.spawn(args, env);
  servers.push(server);
  await waitFor(() => server.proc.exitCode !== null || server.url !== "", {
    timeoutMs: 10_000,
    what: "the server to refuse or serve",
  });
  expect(server.url).toBe("");
  await server.exitCode();
  return { code: server.proc.exitCode, stderr: server.stderr };
}

function file(content: string, mode = 0o600): string {
  const path = join(tempDir(), "token");
  writeFileSync(path, content);
  chmodSync(path, mode);
  return path;
}

const environOf = (pid: number) =>
  Bun.file(`/proc/${pid}/environ`)
    .text()
    .then((text) => text.split("\0"));

describe("a token source that is given must hold a token", () => {
  for (const [what, content] of [
    ["an empty", ""],
    ["a whitespace-only", " \n\t\n"],
  ] as const) {
    test.concurrent(`${what} --auth-token-file is a start-up error, not "no auth"`, async () => {
      const path = file(content);
      const { code, stderr } = await refusal(["--auth-token-file", path]);
      expect(code).toBe(2);
      expect(stderr).toBe(
        `repl-mcp: error: the token in ${path} is empty; write one into it (e.g. \`openssl rand -hex 32\`), ` +
          "or drop the option to have one generated\n",
      );
    });
  }

  test.concurrent("an explicitly set, empty REPL_MCP_HTTP_TOKEN is a start-up error", async () => {
    const { code, stderr } = await refusal([], { REPL_MCP_HTTP_TOKEN: "" });
    expect(code).toBe(2);
    expect(stderr).toContain("$REPL_MCP_HTTP_TOKEN is set but empty");
  });
});

describe("the token file is read like any private file", () => {
  test.concurrent("a symlink, a FIFO and another user's file are refused, the FIFO without blocking", async () => {
    const real = file(`${TOKEN}\n`);
    const link = join(dirname(real), "link");
    symlinkSync(real, link);
    const fifo = join(dirname(real), "fifo");
    expect((await run(["mkfifo", "-m", "600", fifo], { timeoutMs: 5_000 })).code).toBe(0);
    const cases = [
      [link, "must not be a symbolic link; point the option at the real file"],
      [fifo, "must be a regular file"],
      [file("x".repeat(5_000)), "exceeds 4096 bytes"],
      [file(`${TOKEN}\n`, 0o640), "must not be accessible to group or others; run chmod 600 on it"],
      [join(dirname(real), "missing"), "does not exist"],
    ];
    if (process.getuid?.() === 0) {
      const foreign = file(`${TOKEN}\n`);
      chownSync(foreign, NOBODY, NOBODY);
      cases.push([foreign, "must be owned by the user running repl-mcp"]);
    } else {
      console.warn("skipped the other user's file: only root can give a file away");
    }
    for (const [path, reason] of cases) {
      const { code, stderr } = await refusal(["--auth-token-file", path as string]);
      expect(code).toBe(2);
      expect(stderr).toBe(`repl-mcp: error: --auth-token-file ${path} ${reason}\n`);
    }
  }, 60_000);
});

/** The lines a server that made its own token prints, in order, with the file in them. */
function expectedNotice(url: string, tokenFile: string) {
  return [
    'repl-mcp: no token was given, so this run made one; clients must send "Authorization: Bearer <token>" with the token kept in:',
    `  ${tokenFile}`,
    "repl-mcp: for Claude Code:",
    `  claude mcp add --transport http repl-mcp ${url} --header "Authorization: Bearer $(cat ${tokenFile})"`,
    `repl-mcp: serving MCP over HTTP at ${url}`,
    "",
  ].join("\n");
}

describe("with no token given, a loopback server makes one and requires it", () => {
  test.concurrent("kept in a private file of the runtime directory, printed with the client configuration", async () => {
    const server = await serve();
    const port = new URL(server.url).port;
    const tokenFile = join(server.home, ".cache", "repl-mcp", "run", `http-127.0.0.1-${port}.token`);
    expect(server.stderr).toBe(expectedNotice(server.url, tokenFile));
    expect(server.tokenFile).toBe(tokenFile);
    expect(server.token).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(tokenFile)).mode & 0o777).toBe(0o700);

    const refused = await post(server.url, INITIALIZE);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("mcp-session-id")).toBeNull();
    const client = await server.connect();
    expect((await client.run("6 * 7")).return_value).toBe("42");

    // A token belongs to one run: the file goes when the server does.
    server.proc.kill("SIGTERM");
    expect(await server.exitCode()).toBe(0);
    expect(existsSync(tokenFile)).toBe(false);
  });

  test.concurrent("in $XDG_RUNTIME_DIR when there is one, and a new token each start", async () => {
    const runtime = tempDir("repl-mcp-runtime-");
    chmodSync(runtime, 0o700);
    const first = await serve([], { XDG_RUNTIME_DIR: runtime });
    expect(first.tokenFile).toBe(
      join(runtime, "repl-mcp", `http-127.0.0.1-${new URL(first.url).port}.token`),
    );
    const second = await serve([], { XDG_RUNTIME_DIR: runtime });
    expect(second.token).not.toBe(first.token);
    expect((await post(second.url, INITIALIZE, first.auth)).status).toBe(401);
    expect((await second.post(INITIALIZE)).status).toBe(200);
  });

  test.concurrent("a runtime directory someone else could use is refused, with the way out", async () => {
    const runtime = tempDir("repl-mcp-runtime-");
    mkdirSync(join(runtime, "repl-mcp"), { mode: 0o777 });
    chmodSync(join(runtime, "repl-mcp"), 0o777);
    const { code, stderr } = await refusal([], { XDG_RUNTIME_DIR: runtime });
    expect(code).toBe(2);
    expect(stderr).toBe(
      `repl-mcp: error: the directory for the generated token ${join(runtime, "repl-mcp")} must have ` +
        "permissions 0700; fix or remove it, or give a token with --auth-token-file\n",
    );
  });

  test.concurrent("another local user can neither read the token nor get in", async () => {
    const setpriv = Bun.which("setpriv");
    if (process.getuid?.() !== 0 || !setpriv || !existsSync("/usr/bin/python3")) {
      console.warn("skipped: needs root, setpriv and /usr/bin/python3 to act as user nobody");
      return;
    }
    const server = await serve();
    // The system interpreter, which user nobody may run (a pyenv one may sit under /root).
    const script = [
      "import json, sys, urllib.request, urllib.error",
      "url, path, body = sys.argv[1:]",
      "out = {}",
      "try:",
      "    open(path).read()",
      "    out['read'] = 'read'",
      "except OSError as e:",
      "    out['read'] = type(e).__name__",
      "request = urllib.request.Request(url, body.encode(), {'content-type': 'application/json',",
      "    'accept': 'application/json, text/event-stream'})",
      "try:",
      "    out['status'] = urllib.request.urlopen(request, timeout=10).status",
      "except urllib.error.HTTPError as e:",
      "    out['status'] = e.code",
      "print(json.dumps(out))",
    ].join("\n");
    const result = await run(
      [
        setpriv,
        `--reuid=${NOBODY}`,
        `--regid=${NOBODY}`,
        "--clear-groups",
        "/usr/bin/python3",
        "-c",
        script,
        server.url,
        server.tokenFile,
        INITIALIZE,
      ],
      { timeoutMs: 20_000 },
    );
    expect(result.stderr).toBe("");
    expect(JSON.parse(result.stdout)).toEqual({ read: "PermissionError", status: 401 });
  });

  test.concurrent("Claude Code's CLI connects with exactly the printed command", async () => {
    const server = await serve();
    const lines = server.stderr.split("\n");
    const command = lines[lines.indexOf("repl-mcp: for Claude Code:") + 1]?.trim() as string;
    expect(command).toStartWith("claude mcp add ");
    const home = tempDir("repl-mcp-claude-");
    const env = { PATH: `${dirname(CLAUDE)}:${process.env.PATH}`, HOME: home, NO_COLOR: "1" };
    const added = await run(["sh", "-c", command], { cwd: home, env, timeoutMs: 60_000 });
    expect(added.code).toBe(0);
    const listed = await run([CLAUDE, "mcp", "list"], { cwd: home, env, timeoutMs: 60_000 });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(`repl-mcp: ${server.url} (HTTP) - ✔ Connected`);
    // The header went in as a header: without it the same URL is refused.
    expect((await post(server.url, INITIALIZE)).status).toBe(401);
  }, 120_000);
});

describe("--no-auth", () => {
  test.concurrent("serves loopback without a token, and says what that means", async () => {
    const server = await serve(["--no-auth"]);
    expect(server.token).toBe("");
    expect(server.stderr).toContain(
      "repl-mcp: warning: --no-auth: any local user or process that can reach this port can run code as",
    );
    expect((await post(server.url, INITIALIZE)).status).toBe(200);
  });

  test.concurrent("is refused beside a token or off loopback, and outside --transport http", async () => {
    for (const [args, env, message] of [
      [["--no-auth", "--host", "0.0.0.0"], {}, "--no-auth only applies to a loopback --host"],
      [["--no-auth", "--auth-token-file", file(`${TOKEN}\n`)], {}, "--no-auth contradicts --auth-token-file"],
      [["--no-auth"], { REPL_MCP_HTTP_TOKEN: TOKEN }, "--no-auth contradicts $REPL_MCP_HTTP_TOKEN"],
    ] as const) {
      const { code, stderr } = await refusal([...args], env);
      expect(code).toBe(2);
      expect(stderr).toContain(message);
    }
    const stdio = await run([BINARY, "--no-auth"], { timeoutMs: 10_000 });
    expect(stdio.code).toBe(2);
    expect(stdio.stderr).toContain("--no-auth only applies with --transport http");
  });
});

describe("the token reaches no child", () => {
  test.concurrent("not the interpreter probe, the worker, its guardian, sh() children or a stdio peer", async () => {
    const dir = tempDir("repl-mcp-env-");
    const log = join(dir, "python-env.log");
    const python = join(dir, "python3");
    writeFileSync(python, `#!/bin/sh\nenv >> '${log}'\necho --- >> '${log}'\nexec '${REAL_PYTHON}' "$@"\n`);
    chmodSync(python, 0o755);
    const registry = join(dir, "registry.json");
    writeFileSync(
      registry,
      JSON.stringify({ mcpServers: { peer: { command: process.execPath, args: [STDIO_PEER] } } }),
    );
    const server = await serve(["--python", python, "--config", registry], { REPL_MCP_HTTP_TOKEN: TOKEN });
    const client = await server.connect({ authorization: `Bearer ${TOKEN}` });
    const seen = (
      await client.run(
        [
          "import os",
          "{'worker': os.environ.get('REPL_MCP_HTTP_TOKEN'),",
          " 'sh': sh('env | grep -c REPL_MCP_HTTP_TOKEN || true').strip(),",
          " 'guardian': os.getppid(),",
          " 'peer': mcp.call('peer', 'whoami')['structuredContent']['pid']}",
        ].join("\n"),
      )
    ).value as { worker: null; sh: string; guardian: number; peer: number };
    expect(seen.worker).toBeNull();
    expect(seen.sh).toBe("0");
    // Their whole initial environments, as the kernel keeps them.
    for (const pid of [seen.guardian, seen.peer]) {
      const environ = await environOf(pid);
      expect(environ.length).toBeGreaterThan(1);
      expect(
        environ.filter((entry) => entry.includes(TOKEN) || entry.startsWith("REPL_MCP_HTTP_TOKEN")),
      ).toEqual([]);
    }
    const invocations = (await Bun.file(log).text()).split("---\n").filter(Boolean);
    // The probe; the worker runs the interpreter the probe resolved, and looked for itself above.
    expect(invocations.length).toBeGreaterThanOrEqual(1);
    expect(invocations.filter((environ) => environ.includes(TOKEN))).toEqual([]);
  }, 60_000);

  test.concurrent("nor a worker of a stdio server that happens to have it in its environment", async () => {
    const harness = await Harness.start({ env: { REPL_MCP_HTTP_TOKEN: TOKEN } });
    try {
      const seen = await harness.run("import os\nos.environ.get('REPL_MCP_HTTP_TOKEN', 'absent')");
      expect(seen.value).toBe("absent");
    } finally {
      await harness.close();
    }
  });
});

/** Sends the head of a POST declaring 100 body bytes, then `first` and optionally a byte every 2 s. */
function slowBody(url: string, auth: Record<string, string>, dribble: boolean) {
  const { port } = new URL(url);
  const socket = connect(Number(port), "127.0.0.1");
  let answer = "";
  let closed = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  socket.on("connect", () => {
    socket.write(
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: ${auth.authorization}\r\n` +
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
        "Content-Length: 100\r\n\r\n{",
    );
    if (dribble) timer = setInterval(() => socket.write(" "), 2_000);
  });
  socket.on("data", (chunk) => {
    answer += chunk.toString();
  });
  socket.on("error", () => {});
  socket.on("close", () => {
    closed = true;
    clearInterval(timer);
  });
  return {
    answer: () => answer,
    closed: () => closed,
    destroy: () => {
      clearInterval(timer);
      socket.destroy();
    },
  };
}

test.concurrent("an authenticated body must arrive within its deadline; a long answer stream is not cut", async () => {
  const server = await serve();
  const client = await server.connect();
  // Runs longer than the body deadline, answered on the POST's event stream.
  const long = client.run("import time; time.sleep(34); 'slept'");
  const sockets = [slowBody(server.url, server.auth, false), slowBody(server.url, server.auth, true)];
  try {
    await waitFor(() => sockets.every((socket) => socket.closed()), {
      timeoutMs: 45_000,
      intervalMs: 250,
      what: "the server to close both slow bodies",
    });
  } finally {
    for (const socket of sockets) socket.destroy();
  }
  for (const socket of sockets) {
    expect(socket.answer()).toStartWith("HTTP/1.1 408 ");
    expect(socket.answer()).toContain("30 s");
  }
  expect((await long).return_value).toContain("slept");
}, 90_000);
