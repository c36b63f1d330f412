// The viewer's guard, its listing and its bounds, without a browser: every request needs the token (401
// otherwise), the Host must be the viewer's own and an Origin its own (403), cancel is a same-origin
// JSON POST, nothing listens and health names no viewer without --viewer, the token reaches no child,
// `repl-mcp viewer` lists a running server and forgets it once it exits, and a flood reaches a page only
// up to the viewer's cap, with the rest counted.
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { VIEWER_BODY_MAX_BYTES } from "../../src/limits.ts";
import { BINARY, Harness, SessionClient, tempDir, waitFor } from "../support/harness.ts";
import { EventReader, listeningPorts, rawRequest, viewerOf } from "../support/viewer.ts";

let harnesses: Harness[] = [];
let readers: EventReader[] = [];
let sessions: SessionClient[] = [];
afterEach(async () => {
  await Promise.all(readers.map((reader) => reader.close()));
  readers = [];
  await Promise.all(sessions.map((session) => session.close()));
  sessions = [];
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

async function start(args: string[] = ["--viewer"], env: Record<string, string> = {}) {
  const h = await Harness.start({ args, env });
  harnesses.push(h);
  return h;
}

// A test that needs only a --viewer server, none of its own (not its exit, its processes or its count of
// open pages), shares one with the file's other such tests; started by the first that asks.
let shared: Promise<Harness> | undefined;
afterAll(async () => {
  await (await shared)?.close();
});
function sharedViewer(): Promise<Harness> {
  shared ??= Harness.start({ args: ["--viewer"] });
  return shared;
}

/** A session of the test's own on `h`, closed after the test. */
async function session(h: Harness): Promise<SessionClient> {
  const opened = await SessionClient.open(h);
  sessions.push(opened);
  return opened;
}

function reader(viewer: Awaited<ReturnType<typeof viewerOf>>) {
  const r = new EventReader(viewer);
  readers.push(r);
  return r;
}

/** The viewer's command, with the server's HOME and XDG directories (where the address files are). */
function viewerCommand(h: Harness, args: string[] = [], env: Record<string, string> = {}) {
  const proc = Bun.spawnSync([BINARY, "viewer", ...args], {
    env: h.env(env),
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, stdout: proc.stdout.toString(), stderr: proc.stderr.toString() };
}

describe("every request needs the token", () => {
  test("no token, a wrong token in the URL or in the cookie: 401, and the page trades a right one for a cookie", async () => {
    const h = await sharedViewer();
    const viewer = await viewerOf(h);
    const host = `Host: 127.0.0.1:${viewer.port}`;
    const wrongCookie = `Cookie: repl_mcp_viewer_${viewer.port}=${"0".repeat(64)}`;
    for (const path of ["/", "/events", "/page.js", "/page.css", "/artifact/a/b", "/display/a/b/0"]) {
      expect((await rawRequest(viewer.port, [`GET ${path} HTTP/1.1`, host])).status).toBe(401);
      expect((await rawRequest(viewer.port, [`GET ${path} HTTP/1.1`, host, wrongCookie])).status).toBe(401);
    }
    expect((await rawRequest(viewer.port, [`GET /?token=${"f".repeat(64)} HTTP/1.1`, host])).status).toBe(
      401,
    );
    // The token is accepted in the URL of the page only, not of its event stream.
    expect((await rawRequest(viewer.port, [`GET /events?token=${viewer.token} HTTP/1.1`, host])).status).toBe(
      401,
    );
    const cancel = [
      "POST /cancel HTTP/1.1",
      host,
      `Origin: ${viewer.origin}`,
      "Content-Type: application/json",
    ];
    expect((await rawRequest(viewer.port, cancel, '{"session_id":"x","run_id":"y"}')).status).toBe(401);

    const traded = await rawRequest(viewer.port, [`GET /?token=${viewer.token} HTTP/1.1`, host]);
    expect(traded.status).toBe(303);
    expect(traded.head).toMatch(/\r\nlocation: \/\r\n/i);
    const cookie = /\r\nset-cookie: ([^\r]+)/i.exec(traded.head)?.[1] ?? "";
    expect(cookie).toBe(`${viewer.cookie}; HttpOnly; SameSite=Strict; Path=/`);
    const page = await rawRequest(viewer.port, ["GET / HTTP/1.1", host, `Cookie: ${viewer.cookie}`]);
    expect(page.status).toBe(200);
    expect(page.body).toContain('<script src="/page.js"');
    expect(page.head).toMatch(/content-security-policy: default-src 'none'; script-src 'self'/i);
    expect(page.head).toMatch(/referrer-policy: no-referrer/i);
    // The token is printed once and appears nowhere else on stderr.
    expect(h.stderr.split(viewer.token).length - 1).toBe(1);
  });

  test("a foreign Host or Origin is refused (403) even with the token, and cancel is a same-origin JSON POST", async () => {
    const h = await sharedViewer();
    const viewer = await viewerOf(h);
    const cookie = `Cookie: ${viewer.cookie}`;
    const host = `Host: 127.0.0.1:${viewer.port}`;
    for (const foreign of [
      "evil.example",
      `evil.example:${viewer.port}`,
      "127.0.0.1:1",
      `localhost.evil:${viewer.port}`,
    ]) {
      const refused = await rawRequest(viewer.port, ["GET / HTTP/1.1", `Host: ${foreign}`, cookie]);
      expect(refused.status).toBe(403);
    }
    expect(
      (await rawRequest(viewer.port, ["GET / HTTP/1.1", `Host: localhost:${viewer.port}`, cookie])).status,
    ).toBe(200);
    for (const origin of ["http://evil.example", `http://127.0.0.1:${viewer.port + 1}`, "null"]) {
      const refused = await rawRequest(viewer.port, [
        "GET /events HTTP/1.1",
        host,
        cookie,
        `Origin: ${origin}`,
      ]);
      expect(refused.status).toBe(403);
      const post = [
        "POST /cancel HTTP/1.1",
        host,
        cookie,
        `Origin: ${origin}`,
        "Content-Type: application/json",
      ];
      expect((await rawRequest(viewer.port, post, "{}")).status).toBe(403);
    }
    const json = "Content-Type: application/json";
    const body = JSON.stringify({ session_id: await h.sessionId(), run_id: "none" });
    // No Origin at all: a state change must prove it comes from the page.
    expect((await rawRequest(viewer.port, ["POST /cancel HTTP/1.1", host, cookie, json], body)).status).toBe(
      403,
    );
    const own = ["POST /cancel HTTP/1.1", host, cookie, `Origin: ${viewer.origin}`];
    expect((await rawRequest(viewer.port, [...own, "Content-Type: text/plain"], body)).status).toBe(415);
    expect(
      (await rawRequest(viewer.port, [...own, json], "x".repeat(VIEWER_BODY_MAX_BYTES + 1))).status,
    ).toBe(413);
    const nothing = await rawRequest(viewer.port, [...own, json], body);
    expect(nothing.status).toBe(409);
    expect(JSON.parse(nothing.body)).toEqual({ cancel_requested: false, error: "No matching active run" });
    expect((await rawRequest(viewer.port, ["GET /cancel HTTP/1.1", host, cookie])).status).toBe(404);
    expect((await rawRequest(viewer.port, ["DELETE / HTTP/1.1", host, cookie])).status).toBe(405);
  });

  test("--viewer with a host that is not loopback is refused at start", async () => {
    const proc = Bun.spawn([BINARY, "--transport", "http", "--host", "0.0.0.0", "--port", "0", "--viewer"], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: tempDir(),
        REPL_MCP_HTTP_TOKEN: "t".repeat(32),
      },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await proc.exited).toBe(2);
    const stderr = await new Response(proc.stderr).text();
    expect(stderr).toContain(
      "--viewer shows and cancels everything the agent runs, so it serves loopback only",
    );
    expect(stderr).not.toContain("viewer at");
  });
});

describe("off unless asked for", () => {
  test("without --viewer nothing listens and health names no viewer; with it, health gives the printed URL", async () => {
    const off = await start([]);
    expect((await off.health()).server.viewer_url).toBeUndefined();
    await off.run("1 + 1");
    expect(listeningPorts(off.serverPid)).toEqual([]);
    expect(off.stderr).not.toContain("viewer at");

    const on = await start([], { REPL_MCP_VIEWER: "1" });
    const viewer = await viewerOf(on);
    expect((await on.health()).server.viewer_url).toBe(viewer.url);
    expect(listeningPorts(on.serverPid)).toEqual([viewer.port]);
  });

  test("the token and REPL_MCP_VIEWER reach no child", async () => {
    const h = await start([], { REPL_MCP_VIEWER: "1" });
    const viewer = await viewerOf(h);
    const seen = await h.run(
      `import os\n(os.environ.get('REPL_MCP_VIEWER'), [k for k, v in os.environ.items() if ${JSON.stringify(viewer.token)} in v])`,
    );
    expect(seen.return_value).toBe("[null, []]");
    for (const pid of h.children()) {
      const environ = readFileSync(`/proc/${pid}/environ`, "latin1");
      expect(environ).not.toContain(viewer.token);
      expect(environ).not.toContain("REPL_MCP_VIEWER");
    }
  });
});

describe("repl-mcp viewer", () => {
  test("lists a running server from a private address file, and stops listing it once it exits", async () => {
    const h = await start();
    const viewer = await viewerOf(h);
    const listed = viewerCommand(h);
    expect(listed.code).toBe(0);
    const [header, row] = listed.stdout.trim().split("\n");
    expect(header).toMatch(/^PROJECT\s+PID\s+STARTED\s+URL$/);
    expect(row).toContain(h.project);
    expect(row).toContain(` ${h.serverPid} `);
    expect(row?.endsWith(viewer.url)).toBe(true);
    const dir = join(h.home, ".cache", "repl-mcp", "run");
    const files = readdirSync(dir).filter((name) => name.startsWith("viewer-"));
    expect(files).toEqual([`viewer-${h.serverPid}.json`]);
    expect(statSync(join(dir, files[0] as string)).mode & 0o777).toBe(0o600);

    await h.client.close();
    await waitFor(() => !readdirSync(dir).some((name) => name.startsWith("viewer-")), {
      timeoutMs: 10_000,
      what: "the address file to go",
    });
    const after = viewerCommand(h);
    expect(after.code).toBe(1);
    expect(after.stdout).toBe("");
    expect(after.stderr).toContain("no viewer is running; start the server with --viewer");
  });

  test("--open hands the newest viewer's URL to xdg-open", async () => {
    const h = await sharedViewer();
    const viewer = await viewerOf(h);
    const bin = tempDir();
    const opened = join(bin, "opened");
    writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\nprintf '%s' "$1" > ${opened}\n`);
    chmodSync(join(bin, "xdg-open"), 0o755);
    const result = viewerCommand(h, ["--open"], { PATH: `${bin}:${process.env.PATH}` });
    expect(result.code).toBe(0);
    expect(readFileSync(opened, "utf8")).toBe(viewer.url);
  });
});

describe("bounds", () => {
  test("a flood reaches the page bounded, and the page is told the output was cut", async () => {
    const h = await sharedViewer();
    const viewer = await viewerOf(h);
    const own = await session(h);
    const page = reader(viewer);
    await waitFor(() => page.of("hello").length === 1, { what: "the snapshot" });
    const result = await own.run(
      "import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 50_000)\n'done'",
    );
    expect(result.success).toBe(true);
    await waitFor(
      () =>
        page.of("run").some((event) => event.run.run_id === result.run_id && event.run.status !== "running"),
      {
        what: "the finished run on the page",
      },
    );
    const outputs = page.of("output").filter((event) => event.run_id === result.run_id);
    // The worker bounds what it streams; the viewer's own cap would cut anything past 64 Ki characters.
    // (A run that ends before the next flush sends its output in its final view only.)
    const sent = outputs.reduce((sum, event) => sum + event.stdout.length, 0);
    expect(sent).toBeLessThanOrEqual(65_536);
    const finished = page
      .of("run")
      .find((event) => event.run.run_id === result.run_id && event.run.status !== "running");
    expect(finished?.run.truncated.stdout).toBe(true);
    expect(finished?.run.stdout.length).toBeGreaterThan(0);
    expect(finished?.run.stdout.length).toBeLessThanOrEqual(65_536);
  });

  test("at most four pages hold an event stream; a fifth is told to close one", async () => {
    const h = await start();
    const viewer = await viewerOf(h);
    const pages = [0, 1, 2, 3].map(() => reader(viewer));
    await waitFor(() => pages.every((page) => page.of("hello").length === 1), { what: "four snapshots" });
    const fifth = await rawRequest(viewer.port, [
      "GET /events HTTP/1.1",
      `Host: 127.0.0.1:${viewer.port}`,
      `Cookie: ${viewer.cookie}`,
    ]);
    expect(fifth.status).toBe(503);
    expect(fifth.body).toContain("4 pages are open already; close one and reload");
  });
});
