// python_execute_file: saved scripts in the session namespace or in a fresh worker.
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sessionPerTest, waitFor } from "../support/harness.ts";

// One server for the file; each test runs in a session (a worker and a project) of its own.
const h = sessionPerTest();

function script(name: string, text: string | Buffer): string {
  const path = join(h.project, name);
  writeFileSync(path, text);
  return path;
}

async function runFile(path: string, args: Record<string, unknown> = {}) {
  return (await h.call("python_execute_file", { session_id: h.id, path, ...args })).structuredContent;
}

describe("persistent mode", () => {
  test("__main__, __file__, argv with spaces, sys.path[0]; all restored afterwards; variables stay", async () => {
    mkdirSync(join(h.project, "pkg"));
    writeFileSync(join(h.project, "pkg", "helper.py"), "VALUE = 'sibling'\n");
    script(
      "pkg/main.py",
      "import sys, helper\nfrom_file = [__name__, __file__, list(sys.argv), sys.path[0], helper.VALUE]\n",
    );
    const before = await h.run(
      "import sys\nargv_before = sys.argv\npath_before = sys.path\n[sys.argv, sys.path[0]]",
    );
    const result = await runFile("pkg/main.py", { argv: ["a b", "--flag"] });
    expect(result.success).toBe(true);
    expect(result.exit_code).toBe(0);
    const main = join(h.project, "pkg", "main.py");
    expect(await h.run("from_file").then((r) => r.value)).toEqual([
      "__main__",
      main,
      [main, "a b", "--flag"],
      join(h.project, "pkg"),
      "sibling",
    ]);
    const after = await h.run(
      "import sys\n[sys.argv is argv_before, sys.path is path_before, sys.argv, sys.path[0], __name__]",
    );
    expect(after.value).toEqual([true, true, before.value[0], before.value[1], "__repl__"]);
  });

  test("tracebacks name the real file and line; PEP 263 encodings are honoured", async () => {
    const broken = script("broken.py", "x = 1\nraise ValueError('in file')\n");
    const failed = await runFile("broken.py");
    expect(failed.success).toBe(false);
    expect(failed.error).toContain(`File "${broken}", line 2`);
    expect(failed.error).toContain("raise ValueError('in file')");
    // "été" in latin-1 bytes: not valid UTF-8, so only the coding declaration makes it readable.
    script("latin.py", Buffer.from("# -*- coding: latin-1 -*-\nword = '\xe9t\xe9'\n", "latin1"));
    const latin = await runFile("latin.py");
    expect(latin.success).toBe(true);
    expect((await h.run("word")).value).toBe("été");
  });

  test("the sys.exit matrix", async () => {
    const cases: [string, boolean, number, string | null][] = [
      ["import sys\nsys.exit()", true, 0, null],
      ["import sys\nsys.exit(None)", true, 0, null],
      ["import sys\nsys.exit(0)", true, 0, null],
      ["import sys\nsys.exit(2)", false, 2, "Saved Python file exited with status 2"],
    ];
    for (const mode of ["persistent", "fresh"]) {
      for (const [code, success, exitCode, error] of cases) {
        script("exit.py", `${code}\nafter_exit = True\n`);
        const result = await runFile("exit.py", { mode });
        expect([mode, code, result.success, result.exit_code, result.error]).toEqual([
          mode,
          code,
          success,
          exitCode,
          error,
        ]);
      }
      script("msg.py", "before_exit = True\nimport sys\nsys.exit('stopped')\n");
      const message = await runFile("msg.py", { mode });
      expect([message.success, message.exit_code, message.stderr]).toEqual([false, 1, "stopped\n"]);
    }
    expect((await h.run("[globals().get('before_exit'), globals().get('after_exit')]")).value).toEqual([
      true,
      null,
    ]);
  });

  test("a source over 256 KiB is refused", async () => {
    script("big.py", `# ${"x".repeat(270_000)}\n`);
    const result = await runFile("big.py");
    expect(result.success).toBe(false);
    expect(result.error).toContain("Python source file exceeds 256 KiB");
  });

  test("a missing file is an execution-shaped error", async () => {
    const result = await h.call("python_execute_file", { session_id: h.id, path: "nope.py" });
    expect(result.isError).toBe(true);
    expect(result.structuredContent.error).toContain("not found");
    expect(result.structuredContent.run_id).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("fresh mode", () => {
  test("runs in its own worker and leaves the namespace and generation alone", async () => {
    await h.run("mine = 'kept'\nimport os\nmy_pid = os.getpid()");
    // The server's processes before the fresh run (guardian, workers): none may remain beyond these.
    const before = new Set(h.server.children());
    script("fresh.py", "import os, sys\nprint(os.getpid(), sys.argv[1:])\nmine = 'overwritten'\n");
    const result = await runFile("fresh.py", { mode: "fresh", argv: ["with space"] });
    expect(result.success).toBe(true);
    expect(result.execution_mode).toBe("fresh");
    expect(result.state).toBe("preserved");
    expect(result.state_reset).toBe(false);
    expect(result.generation).toBe(1);
    const [pid, argv] = [Number.parseInt(result.stdout, 10), result.stdout.slice(result.stdout.indexOf("["))];
    expect(argv.trim()).toBe("['with space']");
    const after = await h.run(`[mine, my_pid != ${pid}]`);
    expect(after.value).toEqual(["kept", true]);
    expect(after.generation).toBe(1);
    await waitFor(() => h.server.children().every((pid) => before.has(pid)), {
      timeoutMs: 3_000,
      what: "the fresh worker to be gone",
    });
  });

  test("a fresh run is polled and cancelled like any run", async () => {
    script(
      "slow.py",
      "import os, time\nos.write(2, b'native-fresh\\n')\nprint('tick', flush=True)\ntime.sleep(30)\n",
    );
    const pending = h.call("python_execute_file", { session_id: h.id, path: "slow.py", mode: "fresh" });
    await waitFor(
      async () => {
        const live = (await h.call("python_run", {})).structuredContent;
        return (live.stdout ?? "").includes("tick") && (live.native_stderr ?? "").includes("native-fresh");
      },
      { timeoutMs: 10_000, what: "live output of the fresh run" },
    );
    await h.call("python_cancel", {});
    const result = (await pending).structuredContent;
    expect(result.success).toBe(false);
    expect(result.error).toBe("Execution cancelled");
    expect(result.execution_mode).toBe("fresh");
  });
});
