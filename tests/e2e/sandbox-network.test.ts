// A contained cell's network (--sandbox, issue 45): hosts the policy allows work (pip_install from a
// local index), a host nobody allowed is put to the person (an MCP elicitation form, the viewer page)
// and goes through only when they allow it, once or for the session; a denial is the proxy's 403 and a
// sandbox_denials entry; with nobody to ask the cell is refused at once; python_run says what a run
// waits for; the journal keeps each decision (host and port, never the request); a cell blocked in a
// proxied download can be cancelled. The hosts are HTTP servers on a second host in a network namespace
// (the proxy refuses to dial this machine's own addresses). Two contained servers serve the file, each
// test in a session of its own: one whose client answers forms, one with a viewer and a client without.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import type { Page } from "playwright-core";
import { Harness, SessionClient, tempDir, waitFor } from "../support/harness.ts";
import { type HostedHttp, netnsMissing, SecondHost } from "../support/netns.ts";
import { run } from "../support/run.ts";
import { sandboxMissing } from "../support/sandbox.ts";
import { Browser, browserMissing, viewerOf } from "../support/viewer.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";
const MAKE_WHEEL = resolve(import.meta.dir, "../fixtures/python/make_wheel.py");

const reason = sandboxMissing() ?? netnsMissing();
if (reason) console.warn(`skipping the contained network tests: ${reason}`);
const noBrowser = reason ?? browserMissing();
if (!reason && noBrowser) console.warn(`skipping the viewer's network question test: ${noBrowser}`);

type Answer = { action: "accept"; content: { decision: string } } | { action: "decline" };
const decide = (decision: string): Answer => ({ action: "accept", content: { decision } });

/** The person behind the forms of the file's elicitation server: what the running test answers, and what it was asked. */
const person = { answer: (_message: string): Answer => ({ action: "decline" }), asked: [] as string[] };

let dir: string;
let host: SecondHost | undefined;
/** A host the policy allows (the package index, the slow download) and one it says nothing about. */
let allowed: HostedHttp;
let unknown: HostedHttp;
let journal: string;
let forms: Harness | undefined;
let viewer: Harness | undefined;
let browser: Browser | undefined;
let page: Page | undefined;
let session: SessionClient | undefined;

beforeAll(async () => {
  if (reason) return;
  dir = tempDir("repl-mcp-sandbox-network-");
  host = await SecondHost.create({ range: "198.18.0.0" });
  const www = join(dir, "www");
  mkdirSync(join(www, "files"), { recursive: true });
  mkdirSync(join(www, "simple", "replmcp-tiny"), { recursive: true });
  writeFileSync(join(www, "hello.txt"), "hello from outside\n");
  const made = await run([SYSTEM_PYTHON, MAKE_WHEEL, join(www, "files"), "replmcp-tiny", "0.1.0"]);
  if (made.code !== 0) throw new Error(`make_wheel: ${made.stderr}`);
  const wheel = "replmcp_tiny-0.1.0-py3-none-any.whl";
  writeFileSync(
    join(www, "simple", "replmcp-tiny", "index.html"),
    `<!DOCTYPE html><html><body><a href="../../files/${wheel}">${wheel}</a></body></html>\n`,
  );
  [allowed, unknown] = await Promise.all([host.serve(www), host.serve(www)]);
  const policy = join(dir, "policy.json");
  writeFileSync(policy, JSON.stringify({ network: { allowedDomains: [`${host.address}:${allowed.port}`] } }));
  journal = join(dir, "journal.json");
  [forms, viewer] = await Promise.all([
    Harness.start({
      args: ["--sandbox", policy, "--journal", journal],
      capabilities: { elicitation: { form: {} } },
      beforeConnect: (client: Client) => {
        client.setRequestHandler("elicitation/create", async (request) => {
          const message = (request.params as { message: string }).message;
          person.asked.push(message);
          return person.answer(message) as never;
        });
      },
    }),
    Harness.start({ args: ["--sandbox", policy, "--viewer"] }),
  ]);
});

afterEach(async () => {
  await session?.close();
  session = undefined;
  person.asked = [];
  person.answer = () => ({ action: "decline" });
});

afterAll(async () => {
  await page?.close().catch(() => undefined);
  await browser?.close();
  await forms?.close();
  await viewer?.close();
  await allowed?.stop();
  await unknown?.stop();
  await host?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function open(server: Harness | undefined, beforeOpen?: (project: string) => void) {
  session = await SessionClient.open(server as Harness, { beforeOpen });
  return session;
}

/** A cell that GETs `url` through the sandbox's proxy and ends with the body, or with the HTTP error. */
function get(url: string): string {
  return `import urllib.request\nurllib.request.urlopen(${JSON.stringify(url)}, timeout=60).read().decode()`;
}

function denials(result: Record<string, any>): { kind: string; target: string; reason: string }[] {
  return result.sandbox_denials ?? [];
}

/** Polls a python_start run until `check` holds on what python_run says. */
async function pollRun(seat: SessionClient, runId: string, check: (run: Record<string, any>) => boolean) {
  let last: Record<string, any> = {};
  await waitFor(
    async () => {
      last = (await seat.call("python_run", { run_id: runId })).structuredContent;
      return check(last);
    },
    { timeoutMs: 30_000, what: `run ${runId}: ${JSON.stringify(last).slice(0, 300)}` },
  );
  return last;
}

describe.skipIf(reason !== undefined)("a contained cell's network", () => {
  test("a host the person allows once goes through once; denied, the cell gets the proxy's 403 and its denial; the journal keeps both decisions and no request", async () => {
    const seat = await open(forms);
    const target = `${host?.address}:${unknown.port}`;
    person.answer = () => decide("allow_once");
    const once = await seat.run(get(`${unknown.origin}/hello.txt?secret-query=once`));
    expect(once.value).toBe("hello from outside\n");
    expect(person.asked).toHaveLength(1);
    expect(person.asked[0]).toContain(`wants to connect to ${target}`);
    expect(person.asked[0]).not.toContain("secret-query");
    expect(unknown.received("/hello.txt")).toHaveLength(1);

    // Allowed once is this connection only: the next one is asked again.
    person.answer = () => decide("deny");
    const denied = await seat.run(get(`${unknown.origin}/denied-path`));
    expect(person.asked).toHaveLength(2);
    expect(denied.success).toBe(false);
    expect(denied.error).toContain("HTTP Error 403");
    expect(denials(denied)).toEqual([{ kind: "network", target, reason: `the person denied ${target}` }]);
    expect(unknown.received("/denied-path")).toEqual([]);

    const records = (JSON.parse(readFileSync(journal, "utf8")) as Record<string, any>[]).filter(
      (record) => record.session_id === seat.id,
    );
    expect(
      records.map((record) => [
        record.kind,
        record.server,
        record.tool,
        record.status,
        record.approval.decision,
      ]),
    ).toEqual([
      ["network", "network", target, "completed", "allow_once"],
      ["network", "network", target, "denied", "deny"],
    ]);
    const text = readFileSync(journal, "utf8");
    for (const request of ["hello.txt", "secret-query", "denied-path"]) expect(text).not.toContain(request);
  }, 60_000);

  test("allowed for the session, a second connection to the host is not asked", async () => {
    const seat = await open(forms);
    person.answer = () => decide("allow_session");
    const before = unknown.received("/hello.txt").length;
    const both = await seat.run(
      `import urllib.request\n[urllib.request.urlopen('${unknown.origin}/hello.txt', timeout=60).read().decode() for _ in range(2)]`,
    );
    expect(both.value).toEqual(["hello from outside\n", "hello from outside\n"]);
    const again = await seat.run(get(`${unknown.origin}/hello.txt`));
    expect(again.value).toBe("hello from outside\n");
    expect(person.asked).toHaveLength(1);
    expect(unknown.received("/hello.txt").length - before).toBe(3);
  }, 60_000);

  test("with nobody to ask (no elicitation, no viewer page) a connection is refused at once", async () => {
    const seat = await open(viewer);
    const target = `${host?.address}:${unknown.port}`;
    // The server's approval timeout is minutes: a question left waiting would outlast the test.
    const refused = await seat.run(get(`${unknown.origin}/nobody`));
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("HTTP Error 403");
    expect(denials(refused)).toHaveLength(1);
    expect(denials(refused)[0]?.target).toBe(target);
    expect(denials(refused)[0]?.reason).toContain("nobody could be asked");
    expect(unknown.received("/nobody")).toEqual([]);
  }, 60_000);

  test("a host the policy allows is reached without asking: pip_install from a local index into the project's .venv", async () => {
    const seat = await open(forms, (project) => {
      const made = Bun.spawnSync([SYSTEM_PYTHON, "-m", "venv", "--without-pip", join(project, ".venv")]);
      if (made.exitCode !== 0) throw new Error(made.stderr.toString());
      const unpacked = Bun.spawnSync([join(project, ".venv", "bin", "python"), "-c", UNPACK_PIP]);
      if (unpacked.exitCode !== 0) throw new Error(`no pip wheel to unpack: ${unpacked.stderr}`);
    });
    const installed = await seat.run(
      [
        "import os",
        "os.environ['PIP_CONFIG_FILE'] = os.devnull",
        `os.environ['PIP_TRUSTED_HOST'] = ${JSON.stringify(host?.address)}`,
        `r = pip_install('replmcp-tiny', index_url=${JSON.stringify(`${allowed.origin}/simple/`)})`,
        "import replmcp_tiny",
        "[r.changed, replmcp_tiny.VERSION]",
      ].join("\n"),
      { timeout: 300 },
    );
    if (!installed.success) throw new Error(`${installed.error}\n${installed.stderr}`);
    expect(installed.value).toEqual([[{ name: "replmcp-tiny", before: null, after: "0.1.0" }], "0.1.0"]);
    expect(allowed.received("/simple/replmcp-tiny/")).not.toEqual([]);
    expect(allowed.received("/files/replmcp_tiny-0.1.0-py3-none-any.whl")).toHaveLength(1);
    expect(person.asked).toEqual([]);
    expect(existsSync(join(seat.project, ".venv", "lib"))).toBe(true);
  }, 300_000);

  test("a cell blocked in a proxied download is cancelled", async () => {
    const seat = await open(forms);
    const started = await seat.call("python_start", {
      code: `import urllib.request\nprint('downloading', flush=True)\nurllib.request.urlopen('${allowed.origin}/slow/cancel', timeout=600).read()`,
    });
    const runId = started.structuredContent.run_id as string;
    await pollRun(seat, runId, (live) => String(live.stdout).includes("downloading"));
    await waitFor(() => allowed.received("/slow/cancel").length === 1, { what: "the download to start" });
    expect((await seat.call("python_cancel", { run_id: runId })).structuredContent.cancel_requested).toBe(
      true,
    );
    const done = await pollRun(seat, runId, (result) => result.success !== undefined);
    expect(done.success).toBe(false);
    expect(done.error).toBe("Execution cancelled");
    // The session goes on.
    expect((await seat.run("1 + 1")).value).toBe(2);
  }, 60_000);
});

describe.skipIf(noBrowser !== undefined)("a contained cell's network, asked on the viewer page", () => {
  test("python_run says the run waits for a network approval; Allow once on the page lets it through", async () => {
    browser = await Browser.launch();
    const address = await viewerOf(viewer as Harness);
    page = await browser.context.newPage();
    await page.goto(address.url);
    await page.locator("#connection.live").waitFor();
    const seat = await open(viewer);
    const target = `${host?.address}:${unknown.port}`;
    const started = await seat.call("python_start", { code: get(`${unknown.origin}/hello.txt?from=page`) });
    const runId = started.structuredContent.run_id as string;
    const live = await pollRun(seat, runId, (run) => run.waiting_for !== undefined);
    expect(live.waiting_for).toBe(`a network approval of ${target}`);
    const card = page.locator(".question.network");
    await card.waitFor();
    expect(await card.locator("h2").textContent()).toBe(`Allow a connection to ${target}?`);
    await card.getByRole("button", { name: "Allow once" }).click();
    const done = await pollRun(seat, runId, (result) => result.success !== undefined);
    expect(done.value).toBe("hello from outside\n");
    expect(done.sandbox_denials).toBeUndefined();
  }, 90_000);
});

/** Unpacks the pip wheel ensurepip installs from into the running venv's site-packages (pip-install.test.ts). */
const UNPACK_PIP = [
  "import ensurepip, glob, os, sysconfig, zipfile",
  "dirs = [sysconfig.get_config_var('WHEEL_PKG_DIR'), os.path.join(os.path.dirname(ensurepip.__file__), '_bundled')]",
  "wheels = [w for d in dirs if d for w in glob.glob(os.path.join(d, 'pip-*.whl'))]",
  "zipfile.ZipFile(wheels[0]).extractall(sysconfig.get_path('purelib'))",
].join("\n");
