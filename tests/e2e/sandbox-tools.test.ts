// Contained sessions (--sandbox, issue 45) beyond the cell itself: the paths the server opens for a cell
// or the agent (artifact(path=...), artifact_save, artifact_create) get the sandbox's answer; the memory
// budget holds for a worker in its own pid namespace; a host nobody allowed is asked through the
// 2026-07-28 era's input_required rounds too; and `repl-mcp doctor` proves the sandbox holds, or says
// what to install.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import { BINARY, Harness, tempDir } from "../support/harness.ts";
import { homeEnv } from "../support/home.ts";
import { type HostedHttp, netnsMissing, SecondHost } from "../support/netns.ts";
import { run } from "../support/run.ts";
import { sandboxMissing } from "../support/sandbox.ts";

const reason = sandboxMissing();
if (reason) console.warn(`skipping the contained tools tests: ${reason}`);
const SECRET = "ssh-ed25519 AAAA-repl-mcp-sandbox-tools";
const BASHRC = "# the person's own\n";

let server: Harness | undefined;

beforeAll(async () => {
  if (reason) return;
  server = await Harness.start({
    args: ["--sandbox", "--max-memory-mib", "256"],
    beforeStart: (project) => {
      const home = join(project, "..", "home");
      mkdirSync(join(home, ".ssh"), { recursive: true, mode: 0o700 });
      writeFileSync(join(home, ".ssh", "id_ed25519"), SECRET, { mode: 0o600 });
      writeFileSync(join(home, ".bashrc"), BASHRC);
      writeFileSync(join(project, "notes.txt"), "the project's own\n");
      symlinkSync(join(home, ".ssh"), join(project, "keys"));
    },
  });
});

afterAll(async () => {
  await server?.close();
});

function raised(result: Record<string, any>): string {
  return (
    String(result.error ?? "")
      .trim()
      .split("\n")
      .pop() ?? ""
  );
}

describe.skipIf(reason !== undefined)("the server's own path tools in a contained session", () => {
  test("artifact(path=...) reads what the sandbox lets the worker read, and nothing it denies", async () => {
    const h = server as Harness;
    const ok = await h.run(`artifact(path=${JSON.stringify(join(h.project, "notes.txt"))})['size']`);
    expect(ok.value).toBe(18);
    for (const path of [join(h.home, ".ssh", "id_ed25519"), join(h.project, "keys", "id_ed25519")]) {
      const refused = await h.run(`artifact(path=${JSON.stringify(path)})`);
      expect(raised(refused)).toContain("The sandbox refuses this");
      expect(JSON.stringify(refused)).not.toContain(SECRET);
      expect(refused.sandbox_denials).toContainEqual(
        expect.objectContaining({ kind: "read", target: join(h.home, ".ssh", "id_ed25519") }),
      );
    }
  });

  test("artifact_save and the artifact tools write and read only where the sandbox lets the worker", async () => {
    const h = server as Harness;
    const refused = await h.run(
      `artifact_save(artifact(b'echo escaped')['id'], ${JSON.stringify(join(h.home, ".bashrc"))}, overwrite=True)`,
    );
    expect(raised(refused)).toContain("The sandbox refuses this");
    expect(readFileSync(join(h.home, ".bashrc"), "utf8")).toBe(BASHRC);
    const sid = await h.sessionId();
    const tool = await h.call("artifact_create", {
      session_id: sid,
      path: "keys/id_ed25519",
      format: "text",
    });
    expect(tool.isError).toBe(true);
    expect(tool.structuredContent.error_code).toBe("SANDBOX_DENIED");
    expect(JSON.stringify(tool)).not.toContain(SECRET);
    const made = await h.call("artifact_create", { session_id: sid, path: "notes.txt", format: "text" });
    const saved = await h.call("artifact_save", {
      session_id: sid,
      id: made.structuredContent.id,
      path: "copy.txt",
    });
    expect(saved.isError).toBeFalsy();
    expect(readFileSync(join(h.project, "copy.txt"), "utf8")).toBe("the project's own\n");
  });

  test("the memory budget holds for a worker in its own pid namespace", async () => {
    const h = server as Harness;
    const over = await h.run("blob = bytearray(600 * 1024 * 1024)\nimport time; time.sleep(5)", {
      timeout: 30,
    });
    expect(over.error_code).toBe("MEMORY_LIMIT");
    expect(over.state).toBe("cleared");
    expect((await h.run("41 + 1")).value).toBe(42);
  }, 60_000);
});

describe.skipIf(reason !== undefined || netnsMissing() !== undefined)(
  "a host nobody allowed, under 2026-07-28",
  () => {
    let host: SecondHost | undefined;
    let web: HostedHttp | undefined;
    let modern: Harness | undefined;
    const asked: string[] = [];
    afterAll(async () => {
      await modern?.close();
      await web?.stop();
      await host?.destroy();
    });

    test("is put to the person as an input_required round, and goes through when they allow it once", async () => {
      host = await SecondHost.create({ range: "198.18.0.0" });
      const www = tempDir("repl-mcp-sandbox-www-");
      writeFileSync(join(www, "hello.txt"), "hello from outside\n");
      web = await host.serve(www);
      modern = await Harness.start({
        era: "modern",
        args: ["--sandbox"],
        capabilities: { elicitation: { form: {} } },
        beforeConnect: (client: Client) => {
          client.setRequestHandler("elicitation/create", async (request) => {
            asked.push((request.params as { message: string }).message);
            return { action: "accept", content: { decision: "allow_once" } } as never;
          });
        },
      });
      const url = `http://${host.address}:${web.port}/hello.txt`;
      const got = await modern.run(
        `import urllib.request\nurllib.request.urlopen(${JSON.stringify(url)}, timeout=60).read().decode()`,
      );
      expect(got.value).toBe("hello from outside\n");
      expect(asked).toHaveLength(1);
      expect(asked[0]).toContain(`${host.address}:${web.port}`);
      rmSync(www, { recursive: true, force: true });
    }, 60_000);
  },
);

describe.skipIf(reason !== undefined)("repl-mcp doctor --sandbox", () => {
  test("proves the sandbox holds here; without bubblewrap it is a problem naming what to install", async () => {
    const dir = tempDir("repl-mcp-doctor-sandbox-");
    const home = join(dir, "home");
    mkdirSync(home);
    const env = homeEnv(home);
    const here = await run([BINARY, "doctor", "--sandbox", "--json"], { cwd: dir, env });
    const report = JSON.parse(here.stdout);
    expect(report.sandbox.contains).toBe(true);
    expect(report.sandbox.findings.map((finding: { level: string }) => finding.level)).not.toContain(
      "problem",
    );
    const bin = join(dir, "bin");
    mkdirSync(bin);
    for (const program of ["python3", "socat", "rg", "setpriv", "sh"]) {
      const found = Bun.which(program);
      if (found) symlinkSync(found, join(bin, program));
    }
    const without = await run([BINARY, "doctor", "--sandbox", "--json"], {
      cwd: dir,
      env: { ...env, PATH: bin },
    });
    expect(without.code).toBe(1);
    const problems = JSON.parse(without.stdout).problems as {
      section: string;
      problem: string;
      action: string;
    }[];
    expect(problems).toContainEqual({
      section: "Sandbox",
      problem: "bwrap is not installed",
      action: "Install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap)",
    });
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});
