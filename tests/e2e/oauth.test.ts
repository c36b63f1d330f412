// OAuth for HTTP peers end to end (contract §5.8): the real binary logs in against a local
// authorization server fixture (the test plays the browser), later brokers use and refresh the saved
// grant, client_credentials entries get tokens at connect, and no secret shows up anywhere. One server
// serves the file: a test's broker is a session on the test's project, whose .mcp.json names its peer. A
// project's broker lives as long as its sessions, so a session opened after the last one closed gets a
// new one, as a later server would. The lock test races a server of its own against the shared one.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { BINARY, Harness, tempDir, waitFor } from "../support/harness.ts";

const AUTH_SERVER = resolve(import.meta.dir, "../fixtures/oauth/auth-server.ts");
const HTTP_PEER = resolve(import.meta.dir, "../fixtures/peers/http-peer.ts");
const HTTP_PEER_2026 = resolve(import.meta.dir, "../fixtures/peers/http-peer-2026.ts");
const PROMPT = "Open this authorization URL in your browser to grant this broker access:";

interface Fixture {
  url: string;
  stop(): Promise<void>;
}

// What `${VAR}` in the client_credentials entries reads: the server's environment.
const CC_SECRETS = {
  CC_ID: "svc-robot",
  CC_SECRET: "cc-secret-value-42",
  CC_WRONG_SECRET: "wrong-secret-value-77",
};

let server: Harness;
beforeAll(async () => {
  server = await Harness.start({ args: ["--log-level", "debug"], env: CC_SECRETS });
});
afterAll(async () => {
  await server?.close();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** What the fixtures shared by several tests (see `protectedPeer`) leave to the end of the file. */
const lastCleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of lastCleanups.splice(0).reverse()) await cleanup();
});

async function startFixture(
  script: string,
  env: Record<string, string>,
  path = "",
  until = cleanups,
): Promise<Fixture> {
  const proc = Bun.spawn([process.execPath, script], {
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "ignore",
  });
  const first = new TextDecoder().decode((await proc.stdout.getReader().read()).value);
  const port: number = JSON.parse(first.split("\n")[0] as string).port;
  const fixture = {
    url: `http://127.0.0.1:${port}${path}`,
    async stop() {
      proc.kill();
      await proc.exited;
    },
  };
  until.push(() => fixture.stop());
  return fixture;
}

interface TokenRequest {
  grant_type: string;
  resource: string | null;
  scope: string | null;
  ok: boolean;
}

const pairs = new Map<string, Promise<{ as: Fixture; peer: Fixture }>>();

/**
 * An authorization server and a peer protected by it (`peerEnv`: see tests/fixtures/peers/http-tools.ts).
 * Tests asking for the same pair share one, reset first (POST /reset to both, which forgets everything a
 * test could see: clients, tokens, token requests, counters, sessions): starting the two costs more CPU
 * than most tests here spend.
 */
async function protectedPeer(
  asEnv: Record<string, string> = {},
  peerEnv: Record<string, string> = {},
  script = HTTP_PEER,
) {
  const key = JSON.stringify([asEnv, peerEnv, script]);
  let pair = pairs.get(key);
  if (!pair) {
    pair = (async () => {
      const as = await startFixture(AUTH_SERVER, asEnv, "", lastCleanups);
      const peer = await startFixture(
        script,
        { PEER_OAUTH_ISSUER: as.url, ...peerEnv },
        "/mcp",
        lastCleanups,
      );
      return { as, peer };
    })();
    pairs.set(key, pair);
  }
  const { as, peer } = await pair;
  for (const url of [`${as.url}/reset`, `${new URL(peer.url).origin}/reset`]) {
    const reset = await fetch(url, { method: "POST" });
    if (!reset.ok) throw new Error(`POST ${url}: HTTP ${reset.status}`);
  }
  const stats = async () =>
    (await (await fetch(`${as.url}/stats`)).json()) as {
      registrations: number;
      token_requests: TokenRequest[];
    };
  const grants = async (type: string) =>
    (await stats()).token_requests.filter((request) => request.grant_type === type);
  return { as, peer, stats, grants };
}

/** Makes `as`'s token endpoint answer 307 toward `to`. */
async function redirectTokens(as: Fixture, to: string): Promise<void> {
  const set = await fetch(`${as.url}/redirect-tokens`, { method: "POST", body: JSON.stringify({ to }) });
  expect(set.status).toBe(204);
}

async function tokenRequestsAt(fixture: Fixture): Promise<TokenRequest[]> {
  return ((await (await fetch(`${fixture.url}/stats`)).json()) as { token_requests: TokenRequest[] })
    .token_requests;
}

/** A project directory whose registry (.mcp.json) names `web`, and where its credential file goes. */
function project(servers: Record<string, unknown>) {
  const dir = tempDir("repl-mcp-oauth-");
  cleanups.push(() => Bun.$`rm -rf ${dir}`.quiet().then(() => {}));
  const registry = join(dir, ".mcp.json");
  writeFileSync(registry, JSON.stringify({ mcpServers: servers }));
  return { dir, registry, credentials: join(dir, "store", "web.json") };
}

const codeEntry = (url: string) => ({
  type: "http",
  url,
  oauth: { grantType: "authorization_code", credentialFile: "store/web.json", redirectPort: 0 },
});

/** `repl-mcp --config REG --oauth-login web`, with its stderr read line by line. */
function startLogin(dir: string, registry: string, env: Record<string, string> = {}) {
  const proc = Bun.spawn([BINARY, "--config", registry, "--oauth-login", "web"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  cleanups.push(() => {
    proc.kill("SIGKILL");
  });
  let stderr = "";
  const reader = proc.stderr.getReader();
  const pump = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      stderr += new TextDecoder().decode(value);
    }
  })();
  return {
    proc,
    stderr: () => stderr,
    async firstLines(): Promise<string[]> {
      await waitFor(() => stderr.split("\n").length > 2 || proc.exitCode !== null, {
        timeoutMs: 15_000,
        what: "the login prompt",
      });
      return stderr.split("\n").slice(0, 2);
    },
    async finish() {
      const code = await proc.exited;
      await pump;
      return { code, stdout: await new Response(proc.stdout).text(), stderr };
    },
  };
}

/** Plays the browser: follows the authorization URL to the callback (optionally edited) and loads it. */
async function browse(authorizationUrl: string, edit: (callback: URL) => void = () => {}) {
  const approval = await fetch(authorizationUrl, { redirect: "manual" });
  expect(approval.status).toBe(302);
  const callback = new URL(approval.headers.get("location") as string);
  expect(callback.origin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(callback.pathname).toBe("/callback");
  edit(callback);
  const page = await fetch(callback);
  return { status: page.status, text: await page.text(), callback };
}

/** A full login; returns the saved credential file. */
async function login(dir: string, registry: string, credentials: string) {
  const run = startLogin(dir, registry);
  const [prompt, url] = await run.firstLines();
  expect(prompt).toBe(PROMPT);
  const page = await browse(url as string);
  expect(page.status).toBe(200);
  expect(page.text).toContain("Broker authorized. You may close this tab.");
  const finished = await run.finish();
  expect(finished.code).toBe(0);
  return JSON.parse(readFileSync(credentials, "utf8"));
}

interface Session {
  id: string;
  run(code: string): Promise<Record<string, any>>;
  close(): Promise<void>;
}

/**
 * A session of the file's server on the project `dir`: its broker reads the project's .mcp.json. The
 * session closes after the test, or earlier through `close`.
 */
async function sessionFor(dir: string): Promise<Session> {
  const opened = await server.call("python_session_open", { name: "oauth", project: dir });
  if (opened.isError) throw new Error(`python_session_open: ${JSON.stringify(opened.structuredContent)}`);
  const id = opened.structuredContent.session_id as string;
  let closing: Promise<void> | undefined;
  const session: Session = {
    id,
    run: async (code) => (await server.call("execute_python", { session_id: id, code })).structuredContent,
    close: () => {
      closing ??= server.call("python_session_close", { session_id: id }).then((closed) => {
        if (closed.isError)
          throw new Error(`python_session_close: ${JSON.stringify(closed.structuredContent)}`);
      });
      return closing;
    },
  };
  cleanups.push(() => session.close());
  return session;
}

/** A server of its own on the project `dir`, reading its .mcp.json through --config. */
async function serverFor(dir: string, registry: string) {
  const harness = await Harness.start({ cwd: dir, args: ["--config", registry, "--log-level", "debug"] });
  cleanups.push(() => harness.close());
  return harness;
}

/** Runs a cell and returns its value, failing the test with the cell's error and stderr if it failed. */
async function value(target: Pick<Session, "run">, code: string) {
  const result = await target.run(code);
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
  return result.value;
}

async function errorOf(target: Pick<Session, "run">, expression: string): Promise<string> {
  return value(
    target,
    `try:\n    ${expression}\n    out = None\nexcept Exception as e:\n    out = str(e)\nout`,
  );
}

/** The statuses of `session`'s journal records (the file's server journals every test's calls). */
const statusesOf = (session: Session) =>
  `[r['status'] for r in mcp.journal() if r['session_id'] == ${JSON.stringify(session.id)}]`;

const secretsIn = (file: { token_response: Record<string, string>; client: Record<string, string> }) =>
  [file.token_response.access_token, file.token_response.refresh_token, file.client.client_secret].filter(
    (secret): secret is string => Boolean(secret),
  );

describe("authorization code with PKCE", () => {
  test("login end to end, then a later broker reuses the grant without a new one", async () => {
    const { as, peer, grants, stats } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });

    const before = await sessionFor(dir);
    expect(await value(before, "mcp.explain('web')['status']")).toBe("credentials_missing");
    expect(await errorOf(before, "mcp.call('web', 'count')")).toBe(
      "Independent OAuth grant required: run repl-mcp --config REGISTRY --oauth-login SERVER",
    );

    const run = startLogin(dir, registry);
    const lines = await run.firstLines();
    expect(lines[0]).toBe(PROMPT);
    const authorizationUrl = new URL(lines[1] as string);
    expect(authorizationUrl.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorizationUrl.searchParams.get("state")?.length).toBeGreaterThanOrEqual(32);
    expect(authorizationUrl.searchParams.get("resource")).toBe(peer.url);
    const page = await browse(authorizationUrl.href);
    expect(page.status).toBe(200);
    expect(page.text).toContain("Broker authorized. You may close this tab.");
    const finished = await run.finish();
    expect(finished.code).toBe(0);
    expect(finished.stdout).toBe("");
    expect(finished.stderr.startsWith(`${PROMPT}\n${authorizationUrl.href}\n`)).toBe(true);

    expect(statSync(dirname(credentials)).mode & 0o777).toBe(0o700);
    expect(statSync(credentials).mode & 0o777).toBe(0o600);
    const file = JSON.parse(readFileSync(credentials, "utf8"));
    expect(file.server_url).toBe(peer.url);
    expect(file.client.client_id).toMatch(/^client-/);
    expect(file.client).toMatchObject({ issuer: as.url, token_endpoint: `${as.url}/token` });
    expect(Number.isInteger(file.token_received_at)).toBe(true);
    expect(Math.abs(file.token_received_at - Date.now() / 1000)).toBeLessThan(600);
    expect(file.token_response).toMatchObject({ token_type: "Bearer", expires_in: 3600 });
    expect(file.token_response.refresh_token).toMatch(/^rt-/);
    // Kept as received, including a field the SDK does not know.
    expect(file.token_response.fixture_note).toBe("extra fields are kept as received");
    expect(await grants("authorization_code")).toEqual([
      { grant_type: "authorization_code", resource: peer.url, scope: null, ok: true },
    ]);
    expect((await stats()).registrations).toBe(1);

    // The broker that ran before the login connects once its cooldown is cleared.
    await value(before, "mcp.refresh()");
    expect(await value(before, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(1);
    await before.close();
    const later = await sessionFor(dir);
    expect(await value(later, "mcp.explain('web')['status']")).toBe("disconnected");
    expect(await value(later, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(2);
    expect(await value(later, "mcp.explain('web')['status']")).toBe("ready");
    expect(await grants("refresh_token")).toEqual([]);
    expect(await grants("authorization_code")).toHaveLength(1);

    const logs = server.stderr + finished.stderr;
    for (const secret of secretsIn(file)) expect(logs).not.toContain(secret);
  }, 60_000);

  test("a token at its expiry is refreshed once, the rotated refresh token saved atomically", async () => {
    const { peer, grants } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const first = await login(dir, registry, credentials);
    writeFileSync(credentials, JSON.stringify({ ...first, token_received_at: 1 }), { mode: 0o600 });

    const session = await sessionFor(dir);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(1);
    const refreshed = JSON.parse(readFileSync(credentials, "utf8"));
    expect(await grants("refresh_token")).toEqual([
      { grant_type: "refresh_token", resource: peer.url, scope: null, ok: true },
    ]);
    expect(refreshed.token_received_at).toBeGreaterThan(1);
    expect(refreshed.token_response.refresh_token).not.toBe(first.token_response.refresh_token);
    expect(refreshed.token_response.access_token).not.toBe(first.token_response.access_token);
    expect(refreshed.client).toEqual(first.client);
    expect(statSync(credentials).mode & 0o777).toBe(0o600);

    // A second broker starts from the rotated token: no further refresh is needed.
    await session.close();
    const second = await sessionFor(dir);
    expect(await value(second, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(2);
    expect(await grants("refresh_token")).toHaveLength(1);

    // A running broker notices the file changed under it (an edit, a new login) and reads it again.
    const current = JSON.parse(readFileSync(credentials, "utf8"));
    writeFileSync(credentials, JSON.stringify({ ...current, token_received_at: 1 }), { mode: 0o600 });
    expect(await value(second, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(3);
    expect(await grants("refresh_token")).toHaveLength(2);
    for (const secret of [...secretsIn(first), ...secretsIn(refreshed)]) {
      expect(server.stderr).not.toContain(secret);
    }
  }, 60_000);

  test("two servers due for a refresh at once: the lock lets one refresh, the other uses its result", async () => {
    const { peer, grants } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const first = await login(dir, registry, credentials);
    writeFileSync(credentials, JSON.stringify({ ...first, token_received_at: 1 }), { mode: 0o600 });
    // Two processes: a session of the file's server and a server of its own, on the same registry.
    const [a, b] = await Promise.all([sessionFor(dir), serverFor(dir, registry)]);
    const counts = await Promise.all(
      [a, b].map((broker) => value(broker, "mcp.call('web', 'count')['structuredContent']['tools_call']")),
    );
    expect(counts.sort()).toEqual([1, 2]);
    // Refresh tokens work once: a second refresh with the old one would have failed with invalid_grant.
    expect(await grants("refresh_token")).toEqual([
      { grant_type: "refresh_token", resource: peer.url, scope: null, ok: true },
    ]);
  }, 60_000);

  test("a tampered iss gets 400, no token request, no credential file, non-zero exit", async () => {
    const { peer, grants } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const run = startLogin(dir, registry);
    const [, url] = await run.firstLines();
    const page = await browse(url as string, (callback) => {
      callback.searchParams.set("iss", "http://127.0.0.1:1");
    });
    expect(page.status).toBe(400);
    expect(page.text).toContain("Authorization failed. Return to the terminal.");
    const finished = await run.finish();
    expect(finished.code).not.toBe(0);
    expect(finished.stderr).toContain("iss");
    expect(await grants("authorization_code")).toEqual([]);
    expect(existsSync(credentials)).toBe(false);
  }, 30_000);

  test("callbacks with another state get 400 and are ignored: the login waits for its own", async () => {
    const { peer, grants } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const run = startLogin(dir, registry);
    const [, url] = await run.firstLines();
    const callback = new URL(new URL(url as string).searchParams.get("redirect_uri") as string);
    // A local process gets there first: a forged state, none at all, a forged denial.
    for (const query of ["code=planted&state=forged", "code=planted", "error=access_denied&state=forged"]) {
      const page = await fetch(`${callback.href}?${query}`);
      expect(page.status).toBe(400);
      expect(await page.text()).toContain("Authorization failed. Return to the terminal.");
    }
    const page = await browse(url as string);
    expect(page.status).toBe(200);
    const finished = await run.finish();
    expect(finished.code).toBe(0);
    expect(finished.stderr).toContain(
      "Ignored a callback whose state is not this login's (3 so far); still waiting for the browser",
    );
    expect(await grants("authorization_code")).toHaveLength(1);
    expect(existsSync(credentials)).toBe(true);
  }, 30_000);

  test("a token endpoint that redirects is refused: the refresh token never reaches the other host", async () => {
    const { as, peer } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const first = await login(dir, registry, credentials);
    // Another host that would answer like the real one (and records what reaches it).
    const elsewhere = await startFixture(AUTH_SERVER, {});
    await redirectTokens(as, `${elsewhere.url}/token`);
    writeFileSync(credentials, JSON.stringify({ ...first, token_received_at: 1 }), { mode: 0o600 });

    const session = await sessionFor(dir);
    const error = await errorOf(session, "mcp.call('web', 'count')");
    expect(await tokenRequestsAt(elsewhere)).toEqual([]);
    expect(error).toContain("OAuth token refresh failed: the token endpoint redirected to 127.0.0.1:");
    expect(error).toContain("token requests never follow a redirect");
    // Nothing was spent or rotated away: the grant the login saved still stands.
    const kept = JSON.parse(readFileSync(credentials, "utf8"));
    expect(kept.token_response.refresh_token).toBe(first.token_response.refresh_token);
    for (const secret of secretsIn(first)) expect(error + server.stderr).not.toContain(secret);
  }, 60_000);

  test("a denied authorization gets the failure page and a non-zero exit, with no token request", async () => {
    const { peer, grants } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const run = startLogin(dir, registry);
    const [, url] = await run.firstLines();
    const page = await browse(url as string, (callback) => {
      callback.searchParams.delete("code");
      callback.searchParams.set("error", "access_denied");
    });
    expect(page.status).toBe(400);
    const finished = await run.finish();
    expect(finished.code).toBe(1);
    expect(finished.stderr).toContain("The authorization server returned access_denied instead of a code");
    expect(await grants("authorization_code")).toEqual([]);
    expect(existsSync(credentials)).toBe(false);
  }, 30_000);

  test("a credential directory others may enter is refused before anything is printed", async () => {
    const { peer, stats } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    mkdirSync(dirname(credentials));
    chmodSync(dirname(credentials), 0o755);
    const finished = await startLogin(dir, registry).finish();
    expect(finished.code).not.toBe(0);
    expect(finished.stderr).toContain("OAuth store directory must have permissions 0700");
    expect(finished.stderr).not.toContain(PROMPT);
    expect(existsSync(credentials)).toBe(false);
    expect((await stats()).registrations).toBe(0);
  }, 30_000);

  test("the callback listener answers 404 elsewhere and a file for another URL is refused", async () => {
    const { peer } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const run = startLogin(dir, registry);
    const [, url] = await run.firstLines();
    const redirect = new URL(new URL(url as string).searchParams.get("redirect_uri") as string);
    expect((await fetch(new URL("/other", redirect))).status).toBe(404);
    expect((await browse(url as string)).status).toBe(200);
    expect((await run.finish()).code).toBe(0);

    const file = JSON.parse(readFileSync(credentials, "utf8"));
    writeFileSync(credentials, JSON.stringify({ ...file, server_url: "http://127.0.0.1:1/mcp" }), {
      mode: 0o600,
    });
    const session = await sessionFor(dir);
    const error = await errorOf(session, "mcp.call('web', 'count')");
    expect(error).toContain("granted for a different server URL");
    expect(await value(session, "mcp.explain('web')['status']")).toBe("credentials_missing");
    for (const secret of secretsIn(file)) expect(error + server.stderr).not.toContain(secret);
  }, 30_000);
});

test("--oauth-login refuses unknown names and entries without an authorization-code grant", async () => {
  const { dir, registry } = project({
    plain: { type: "http", url: "http://127.0.0.1:1/mcp" },
    robot: {
      type: "http",
      url: "http://127.0.0.1:1/mcp",
      oauth: { grantType: "client_credentials", clientId: "a", clientSecret: "do-not-print-me" },
    },
  });
  for (const [name, message] of [
    ["missing", 'the registry has no usable server named "missing"; check --config and the entry'],
    ["plain", "--oauth-login needs an HTTP registry entry with an oauth section"],
    ["robot", "--oauth-login needs oauth.grantType authorization_code and an oauth.credentialFile"],
  ]) {
    const proc = Bun.spawn([BINARY, "--config", registry, "--oauth-login", name as string], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stdout, stderr] = await Promise.all([
      proc.exited,
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
    ]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toBe(`repl-mcp: error: ${message}\n`);
  }
});

describe("client credentials", () => {
  const ccEnv = { AS_CC_CLIENT_ID: "svc-robot", AS_CC_CLIENT_SECRET: "cc-secret-value-42" };
  const ccEntry = (url: string, secret = "${CC_SECRET}") => ({
    type: "http",
    url,
    oauth: {
      grantType: "client_credentials",
      clientId: "${CC_ID}",
      clientSecret: secret,
      scopes: ["mcp:tools", "mcp:read"],
    },
  });

  test("a token at connect from ${VAR} secrets, with scopes and resource", async () => {
    const { peer, grants } = await protectedPeer(ccEnv);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    expect(await value(session, "mcp.explain('web')['status']")).toBe("disconnected");
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(1);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(2);
    expect(await grants("client_credentials")).toEqual([
      { grant_type: "client_credentials", resource: peer.url, scope: "mcp:tools mcp:read", ok: true },
    ]);
    const journal = JSON.stringify(await value(session, "mcp.journal()"));
    expect(server.stderr + journal).not.toContain("cc-secret-value-42");
  }, 30_000);

  test("a token endpoint that redirects is refused, even within its own origin", async () => {
    const { as, peer, grants } = await protectedPeer(ccEnv);
    await redirectTokens(as, `${as.url}/token-moved`);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    const error = await errorOf(session, "mcp.call('web', 'count')");
    // The moved endpoint would have answered: the request (and its secret) never went there.
    expect(await grants("client_credentials")).toEqual([]);
    expect(error).toContain(
      `OAuth client_credentials grant failed: the token endpoint redirected to ${new URL(as.url).host}`,
    );
    expect(await value(session, "mcp.explain('web')['status']")).toBe("credentials_missing");
    expect(error + server.stderr).not.toContain("cc-secret-value-42");
  }, 30_000);

  test("a wrong secret fails with credentials_missing and never echoes the secret", async () => {
    const { peer, grants } = await protectedPeer(ccEnv);
    const { dir } = project({ web: ccEntry(peer.url, "${CC_WRONG_SECRET}") });
    const session = await sessionFor(dir);
    const error = await errorOf(session, "mcp.call('web', 'count')");
    expect(error).toContain("OAuth client_credentials grant failed");
    expect(error).toContain("invalid_client");
    const explained = await value(session, "mcp.explain('web')");
    expect(explained.status).toBe("credentials_missing");
    expect((await grants("client_credentials")).every((request) => !request.ok)).toBe(true);
    expect(error + server.stderr + JSON.stringify(explained)).not.toContain("wrong-secret-value-77");
  }, 30_000);

  // Issue 20, defects 2 and 3: neither a JSON-RPC error from a healthy peer nor a result too large to
  // deliver says anything about the transport, so the next call keeps it (no second initialize).
  test("a JSON-RPC error and an undeliverable result keep the connection and its session", async () => {
    const { peer } = await protectedPeer(ccEnv);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    expect(await errorOf(session, "mcp.call('web', 'flaky')")).toStartWith("MCP transport or protocol error");
    expect(await value(session, "mcp.text(mcp.call('web', 'flaky'))")).toBe("ok");
    expect(await errorOf(session, "mcp.call('web', 'big', arguments={'bytes': 950000})")).toContain(
      "MCP returned a known outcome for call",
    );
    const counts = await value(session, "mcp.call('web', 'count')['structuredContent']");
    expect(counts).toEqual({ tools_call: 4, initialize: 1, sessions: 1 });
    expect(await value(session, statusesOf(session))).toEqual([
      "outcome_unknown",
      "completed",
      "completed",
      "completed",
    ]);
  }, 30_000);

  test("an oversized result is a known outcome, journaled completed and never retried", async () => {
    const { peer } = await protectedPeer(ccEnv);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    const error = await errorOf(session, "mcp.call('web', 'big', arguments={'bytes': 950000})");
    expect(error).toContain("MCP returned a known outcome for call");
    expect(await value(session, statusesOf(session))).toEqual(["completed"]);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(2);
  }, 30_000);
});

// Issue 20, defect 7: a token the peer stops accepting on a live connection (revoked, or expired early)
// is renewed once, under the credential lock, and the refused request is sent once more: a 401 means the
// peer refused it before running it. A second 401 is reported as missing credentials.
describe("a token refused on a live connection", () => {
  const ccEnv = { AS_CC_CLIENT_ID: "svc-robot", AS_CC_CLIENT_SECRET: "cc-secret-value-42" };
  const ccEntry = (url: string) => ({
    type: "http",
    url,
    oauth: { grantType: "client_credentials", clientId: "${CC_ID}", clientSecret: "${CC_SECRET}" },
  });
  const post = (url: string) => fetch(url, { method: "POST" });

  test("client_credentials: a new token, the call repeated once, on the same connection", async () => {
    const { as, peer, grants } = await protectedPeer(ccEnv);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(1);
    await post(`${as.url}/revoke`);
    // The refused request never ran; the repeated one ran once.
    const counts = await value(session, "mcp.call('web', 'count')['structuredContent']");
    expect(counts).toEqual({ tools_call: 2, initialize: 1, sessions: 1 });
    expect(await grants("client_credentials")).toHaveLength(2);
    expect(await value(session, statusesOf(session))).toEqual(["completed", "completed"]);
  }, 30_000);

  test("authorization_code: refreshed with the refresh token under the lock, the rotation saved", async () => {
    const { as, peer, grants } = await protectedPeer();
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    const run = startLogin(dir, registry);
    const [, url] = await run.firstLines();
    expect((await browse(url as string)).status).toBe(200);
    expect((await run.finish()).code).toBe(0);
    const first = JSON.parse(readFileSync(credentials, "utf8"));
    const session = await sessionFor(dir);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(1);
    await post(`${as.url}/revoke`);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']")).toEqual({
      tools_call: 2,
      initialize: 1,
      sessions: 1,
    });
    expect(await grants("refresh_token")).toHaveLength(1);
    const saved = JSON.parse(readFileSync(credentials, "utf8"));
    expect(saved.token_response.refresh_token).not.toBe(first.token_response.refresh_token);
    expect(saved.token_response.access_token).not.toBe(first.token_response.access_token);
    for (const secret of secretsIn(first)) expect(server.stderr).not.toContain(secret);
  }, 60_000);

  test("a renewed token refused too is reported as missing credentials, and nothing ran", async () => {
    const { as, peer, grants } = await protectedPeer(ccEnv);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(1);
    await post(`${as.url}/refuse-all`);
    const error = await errorOf(session, "mcp.call('web', 'flaky')");
    expect(error).toContain("MCP HTTP peer refused a renewed OAuth token (401)");
    expect(error).toContain("check oauth.clientId, oauth.clientSecret and scopes");
    expect(await grants("client_credentials")).toHaveLength(2);
    expect(await value(session, "mcp.explain('web')['status']")).toBe("credentials_missing");
    expect(await value(session, statusesOf(session))).toEqual(["completed", "outcome_unknown"]);
    expect(error + server.stderr).not.toContain("cc-secret-value-42");
  }, 30_000);

  // Issue 26, defect 2: before, the second 401 closed the connection at once, under a call the peer was
  // still running, which then ended outcome_unknown.
  test("a renewed token refused too: a call still in flight on the connection ends with its result", async () => {
    const dir = tempDir("repl-mcp-oauth-log-");
    cleanups.push(() => Bun.$`rm -rf ${dir}`.quiet().then(() => {}));
    const calls = join(dir, "calls.jsonl");
    const { as, peer } = await protectedPeer(ccEnv, { PEER_CALL_LOG: calls });
    const { dir: projectDir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(projectDir);
    const peerOrigin = new URL(peer.url).origin;
    const outcome = await value(
      session,
      [
        "import asyncio, time, urllib.request",
        "post = lambda url: urllib.request.urlopen(urllib.request.Request(url, method='POST'), timeout=10).read()",
        "held = asyncio.ensure_future(mcp.acall('web', 'hold', timeout=60))",
        "deadline = time.monotonic() + 20",
        `while '"hold"' not in (open(${JSON.stringify(calls)}).read() if __import__('os').path.exists(${JSON.stringify(calls)}) else ''):`,
        "    assert time.monotonic() < deadline, 'the peer never received hold'",
        "    await asyncio.sleep(0.02)",
        `post(${JSON.stringify(`${as.url}/refuse-all`)})`,
        "try:",
        "    await mcp.acall('web', 'flaky')",
        "    refused = None",
        "except Exception as e:",
        "    refused = str(e)",
        `post(${JSON.stringify(`${peerOrigin}/release`)})`,
        "try:",
        "    kept = mcp.text(await held)",
        "except Exception as e:",
        "    kept = str(e)",
        `[refused, kept, ${statusesOf(session)}]`,
      ].join("\n"),
    );
    expect(outcome[0]).toContain("MCP HTTP peer refused a renewed OAuth token (401)");
    expect(outcome[1]).toBe("released");
    expect(outcome[2]).toEqual(["completed", "outcome_unknown"]);
    expect(await value(session, "mcp.explain('web')['status']")).toBe("credentials_missing");
    // The next call does not reuse the retired connection: it waits out the cooldown, then connects anew.
    expect(await errorOf(session, "mcp.call('web', 'count')")).toContain("MCP connection recently failed");
  }, 60_000);
});

// Issue 26, defect 1: the metadata that names the authorization server is learned without sending the
// peer anything it would run. Before, an unauthenticated `initialize` went first only to read its 401;
// a peer that does not protect `initialize` ran it (one more session, never closed), and a 2026-only
// peer got a method it does not serve.
describe("the protected-resource metadata is learned without a request the peer runs", () => {
  const ccEnv = { AS_CC_CLIENT_ID: "svc-robot", AS_CC_CLIENT_SECRET: "cc-secret-value-42" };
  const ccEntry = (url: string) => ({
    type: "http",
    url,
    oauth: { grantType: "client_credentials", clientId: "${CC_ID}", clientSecret: "${CC_SECRET}" },
  });
  const OPEN = { PEER_OAUTH_OPEN: "1" };

  test("well-known metadata: one initialize, one session, through a protocol error and an undeliverable result", async () => {
    const { peer, grants } = await protectedPeer(ccEnv, OPEN);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    expect(await errorOf(session, "mcp.call('web', 'flaky')")).toStartWith("MCP transport or protocol error");
    expect(await value(session, "mcp.text(mcp.call('web', 'flaky'))")).toBe("ok");
    expect(await errorOf(session, "mcp.call('web', 'big', arguments={'bytes': 950000})")).toContain(
      "MCP returned a known outcome for call",
    );
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']")).toEqual({
      tools_call: 4,
      initialize: 1,
      sessions: 1,
    });
    expect(await grants("client_credentials")).toHaveLength(1);
  }, 30_000);

  test("metadata named only by a 401: the real request's challenge, still one initialize", async () => {
    const { peer, grants } = await protectedPeer(ccEnv, {
      ...OPEN,
      PEER_OAUTH_METADATA_PATH: "/oauth/resource-metadata",
    });
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']")).toEqual({
      tools_call: 1,
      initialize: 1,
      sessions: 1,
    });
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']['tools_call']")).toBe(2);
    expect(await grants("client_credentials")).toEqual([
      { grant_type: "client_credentials", resource: peer.url, scope: null, ok: true },
    ]);
    expect(server.stderr).not.toContain("cc-secret-value-42");
  }, 30_000);

  test("a 2026-only peer gets no initialize at all", async () => {
    const { peer, grants } = await protectedPeer(ccEnv, OPEN, HTTP_PEER_2026);
    const { dir } = project({ web: ccEntry(peer.url) });
    const session = await sessionFor(dir);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']")).toEqual({
      tools_call: 1,
      initialize: 0,
      sessions: 0,
    });
    expect(await grants("client_credentials")).toHaveLength(1);
  }, 30_000);

  test("an authorization-code login sends the peer nothing it runs", async () => {
    const { peer } = await protectedPeer(
      {},
      { ...OPEN, PEER_OAUTH_METADATA_PATH: "/oauth/resource-metadata" },
    );
    const { dir, registry, credentials } = project({ web: codeEntry(peer.url) });
    await login(dir, registry, credentials);
    const session = await sessionFor(dir);
    expect(await value(session, "mcp.call('web', 'count')['structuredContent']")).toEqual({
      tools_call: 1,
      initialize: 1,
      sessions: 1,
    });
  }, 60_000);
});
