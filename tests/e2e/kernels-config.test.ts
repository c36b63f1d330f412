// The kernel servers file (--kernels, docs/kernels.md): a bad file is refused at start naming the entry
// and the field and never a value; python_health lists the servers without their tokens and without
// contacting them; no child inherits a variable a token names; doctor asks a real Jupyter Server (token
// auth, on loopback) for its kernelspecs and reports a wrong token, a wrong URL and a server that is down.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, Harness, tempDir } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { run } from "../support/run.ts";

const SECRET = "kernel-token-must-never-show";
const noJupyter = jupyterMissing();
if (noJupyter) console.warn(`skipping the kernel server probes: ${noJupyter}`);

const dirs: string[] = [];
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function kernelsFile(servers: unknown): { dir: string; file: string } {
  const dir = tempDir("repl-mcp-kernels-");
  dirs.push(dir);
  mkdirSync(join(dir, "home"));
  const file = join(dir, "kernels.json");
  writeFileSync(file, typeof servers === "string" ? servers : JSON.stringify({ kernelServers: servers }));
  return { dir, file };
}

async function binary(args: string[], cwd: string, env: Record<string, string> = {}) {
  return await run([BINARY, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: join(cwd, "home"), ...env },
    timeoutMs: 30_000,
  });
}

describe("the kernel servers file", () => {
  const refused: [string, unknown, string][] = [
    [
      "an unknown field",
      { gpu: { url: "https://h/", tokne: "x" } },
      'kernel server "gpu": unknown field "tokne"',
    ],
    ["token and tokenFile", { gpu: { url: "https://h/", token: "a", tokenFile: "t" } }, "not both"],
    [
      "a missing variable",
      { gpu: { url: "https://h/", token: "${NO_SUCH_KERNEL_TOKEN}" } },
      "${NO_SUCH_KERNEL_TOKEN}, which is not set",
    ],
    ["credentials in the URL", { gpu: { url: `https://ana:${SECRET}@h/` } }, "must not carry credentials"],
    ["a URL that is not http", { gpu: { url: "ftp://h/" } }, "must be http or https"],
    [
      "a bad start timeout",
      { gpu: { url: "https://h/", startTimeoutS: -1 } },
      'bad value for "startTimeoutS"',
    ],
    ["not JSON", "{", "is not valid JSON"],
  ];
  for (const [what, servers, message] of refused) {
    test(`${what} is refused at start (exit 1), naming the problem and never a value`, async () => {
      const { dir, file } = kernelsFile(servers);
      const result = await binary(["--kernels", file], dir);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(message);
      expect(result.stderr).not.toContain(SECRET);
      expect(result.stdout).toBe("");
    });
  }

  test("a tokenFile others can read is refused; a private one is read", async () => {
    const { dir, file } = kernelsFile({ gpu: { url: "http://127.0.0.1:9/", tokenFile: "token" } });
    writeFileSync(join(dir, "token"), `${SECRET}\n`);
    chmodSync(join(dir, "token"), 0o644);
    const refused = await binary(["--kernels", file], dir);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("chmod 600");
    chmodSync(join(dir, "token"), 0o600);
    const { code, stdout } = await binary(["doctor", "--json", "--kernels", file], dir);
    expect(code).toBe(1); // nothing listens on port 9
    expect(JSON.parse(stdout).kernels.servers[0]).toMatchObject({ name: "gpu", answered: false });
    expect(stdout).not.toContain(SECRET);
  });

  test("python_health lists the servers without tokens; no worker inherits a token's variable", async () => {
    const { dir, file } = kernelsFile({
      local: { url: "http://127.0.0.1:8888/user/ana", token: "${KERNEL_TOKEN}", kernel: "python3" },
      remote: { url: "http://jupyter.example.org/" },
    });
    h = await Harness.start({
      args: ["--kernels", file],
      cwd: dir,
      env: { KERNEL_TOKEN: SECRET, KERNEL_NOTE: "visible" },
    });
    const health = await h.health();
    expect(health.kernel_servers).toEqual([
      { name: "local", url: "http://127.0.0.1:8888/user/ana/", kernel: "python3" },
      {
        name: "remote",
        url: "http://jupyter.example.org/",
        kernel: null,
        warning: "plain http to a host other than loopback: the token and your code travel unencrypted",
      },
    ]);
    expect(JSON.stringify(health)).not.toContain(SECRET);
    // The variable the token names is withheld; an unrelated one is inherited as ever.
    const inherited = await h.run(
      "import os\n[os.environ.get('KERNEL_TOKEN'), os.environ.get('KERNEL_NOTE')]",
    );
    expect(inherited.value).toEqual([null, "visible"]);
  });
});

describe.skipIf(noJupyter !== undefined)("doctor against a real Jupyter Server", () => {
  let jupyter: JupyterServer;
  beforeAll(async () => {
    jupyter = await JupyterServer.start();
  }, 60_000);
  afterAll(async () => {
    await jupyter?.stop();
  });

  test("the right token: it answered, with its kernelspecs; a wrong token, a wrong path and a server that is down are problems", async () => {
    const { dir, file } = kernelsFile({
      good: { url: jupyter.url, token: "${JUPYTER_TOKEN}" },
      wrong: { url: jupyter.url, token: "not-the-token" },
      path: { url: `${jupyter.url}user/nobody/`, token: "${JUPYTER_TOKEN}" },
      down: { url: "http://127.0.0.1:9/", token: "x" },
      missing: { url: jupyter.url, token: "${JUPYTER_TOKEN}", kernel: "julia-1.9" },
    });
    const { code, stdout, stderr } = await binary(["doctor", "--json", "--kernels", file], dir, {
      JUPYTER_TOKEN: jupyter.token,
    });
    expect(stderr).toBe("");
    expect(code).toBe(1);
    const report = JSON.parse(stdout);
    const byName = Object.fromEntries(
      report.kernels.servers.map((server: { name: string }) => [server.name, server]),
    );
    expect(byName.good).toMatchObject({ answered: true, status: 200, default_kernel: "python3" });
    expect(byName.good.kernelspecs).toContain("python3");
    const problems = report.problems.map((entry: { problem: string }) => entry.problem).join("\n");
    expect(problems).toContain("wrong (");
    expect(problems).toMatch(
      /wrong \(.*\) refused the token \(HTTP 403\)|wrong \(.*\) refused the token \(HTTP 401\)/,
    );
    expect(problems).toContain("answered HTTP 404");
    expect(problems).toContain("down (http://127.0.0.1:9/) did not answer");
    expect(problems).toContain('offers no kernel "julia-1.9"');
    expect(problems).not.toMatch(/good \(/);
    expect(stdout).not.toContain(jupyter.token);
  }, 60_000);
});
