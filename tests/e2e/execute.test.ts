// execute_python end to end: the compiled binary, a real python3, the SDK client over stdio. The default
// session's own behaviour is sessions.test.ts's.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Harness, STUCK_IN_C, sessionPerTest } from "../support/harness.ts";

// One server for the file; each test runs in a session (a worker and a project) of its own, and a test
// that needs the server itself starts one.
const h = sessionPerTest();

describe("cells", () => {
  test("variables persist between cells and the trailing value comes back as JSON", async () => {
    const first = await h.run("x = 41");
    expect(first.success).toBe(true);
    expect(first.state_reset).toBe(true);
    expect(first.generation).toBe(1);
    const second = await h.run("x + 1");
    expect(second.success).toBe(true);
    expect(second.value).toBe(42);
    expect(second.return_value).toBe("42");
    expect(second.state_reset).toBe(false);
    expect(second.generation).toBe(1);
    expect(second.execution_mode).toBe("persistent");
    expect(second.run_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("an asyncio.Lock made in one cell is awaited in the next (one persistent loop)", async () => {
    expect(
      (await h.run("import asyncio\nlock = asyncio.Lock()\nloop_id = id(asyncio.get_event_loop())")).success,
    ).toBe(true);
    const used = await h.run(
      "async with lock:\n    await asyncio.sleep(0.01)\n    same = id(asyncio.get_running_loop()) == loop_id\nsame",
    );
    expect(used.error).toBeNull();
    expect(used.value).toBe(true);
  });

  test("an exception fails the cell with a traceback naming the cell, and the next cell works", async () => {
    const failed = await h.call("execute_python", { code: "y = 5\n1/0" });
    expect(failed.isError).toBe(true);
    const value = failed.structuredContent;
    expect(value.success).toBe(false);
    expect(value.state).toBe("preserved");
    expect(value.error).toContain("ZeroDivisionError");
    expect(value.error).toMatch(/File "<repl:[0-9a-f-]+>", line 2/);
    expect(value.error).not.toContain("worker");
    const next = await h.run("y * 2");
    expect(next.value).toBe(10);
  });

  test("the trailing value's __repr__ is never called", async () => {
    const marker = join(h.dir, "repr-called");
    const result = await h.run(
      `class Sneaky:\n    def __repr__(self):\n        open(${JSON.stringify(marker)}, "w").write("x")\n        return "sneaky"\nSneaky()`,
    );
    expect(result.success).toBe(true);
    expect(result.return_value).toContain("Sneaky; safe preview omitted");
    expect(result.truncated.return).toBe(true);
    expect(existsSync(marker)).toBe(false);
  });

  test("fd 1 writes and a 2 MB print are bounded and never corrupt the protocol", async () => {
    const result = await h.run("import os\nos.write(1, b'native-bytes\\n')\nprint('x' * 2_000_000)\n'after'");
    expect(result.success).toBe(true);
    expect(Buffer.byteLength(result.stdout)).toBeLessThanOrEqual(50_000);
    expect(result.stdout.length).toBeGreaterThan(40_000);
    expect(result.truncated.stdout).toBe(true);
    expect(result.stderr).toContain("native-bytes");
    expect(result.value).toBe("after");
    expect((await h.run("1 + 1")).value).toBe(2);
  });

  test("native stderr lands in its own cell's result, with or without the barrier line", async () => {
    // Some cells end before the server has read their fd 2 bytes (the worker then writes the barrier),
    // others after (no barrier): either way each result holds exactly its own bytes.
    for (let i = 0; i < 40; i++) {
      const code =
        i % 2 === 0
          ? `import os\nos.write(2, b'native-${i}\\n')`
          : `import os, time\nos.write(2, b'native-${i}\\n')\ntime.sleep(0.01)`;
      const result = await h.run(code);
      expect(result.stderr).toBe(`native-${i}\n`);
    }
  });

  test("native stderr written before a cell moves fd 2 still lands in that cell's result", async () => {
    // The server is paused while the cell writes (through fd 1, which the worker aimed at its stderr
    // channel), so the bytes are still unread when the cell ends; by then fd 2 is a fresh, empty pipe.
    // The worker must judge (and mark) the channel it started with, not whatever fd 2 has become.
    const code = (i: number) =>
      [
        "import os, signal, subprocess",
        "def parent(pid):",
        "    return int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])",
        "server = parent(os.getppid())",
        "os.kill(server, signal.SIGSTOP)",
        "subprocess.Popen(['sh', '-c', f'sleep 0.2; kill -CONT {server}'])",
        "display('x')",
        `os.write(1, b'moved-${i}\\n')`,
        "r, w = os.pipe()",
        "os.dup2(w, 2)",
      ].join("\n");
    for (let i = 0; i < 3; i++) {
      const result = await h.run(code(i));
      expect(result.success).toBe(true);
      expect(result.stderr).toBe(`moved-${i}\n`);
    }
  });

  test("print to stderr and lone surrogates are captured safely", async () => {
    const result = await h.run("import sys\nprint('warn', file=sys.stderr)\nprint('\\ud800')");
    expect(result.stderr).toContain("warn");
    expect(result.stdout).toBe("?\n");
  });

  test("large output keeps the text preview under 8 KiB and the response under 1 MB", async () => {
    const result = await h.call("execute_python", {
      code: "import os, sys\nsys.stdout.write('\\0' * 50_000)\nos.write(2, b'\\0' * 90_000)",
    });
    expect(result.isError).toBe(false);
    const text = (result.content as { type: string; text: string }[])[0]?.text ?? "";
    expect(Buffer.byteLength(JSON.stringify(result))).toBeLessThanOrEqual(1_000_000);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(8_192 + 200);
    expect(result.structuredContent.text_truncated).toBe(true);
  });
});

describe("crashes, timeouts and reset", () => {
  test("a child forked by a cell and left running leaves quietly and never reads the command pipe", async () => {
    // The child returns from the cell like the worker does; it must neither send a second result nor
    // go on to read frames meant for the worker.
    const forked = await h.run("import os\npid = os.fork()\npid");
    expect(forked.error).toBeNull();
    expect(forked.value).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) expect((await h.run(`pid and ${i}`)).value).toBe(i);
    const status = await h.run("os.waitpid(pid, 0)[1]");
    expect(status.value).toBe(0);
    expect((await h.run("os.getpid() != pid")).value).toBe(true);
  });

  test("os._exit clears the state; the next cell starts a new generation", async () => {
    await h.run("kept = 1");
    const crashed = await h.call("execute_python", {
      code: "import os\nos.write(1, b'before-crash')\nos._exit(3)",
    });
    expect(crashed.isError).toBe(true);
    expect(crashed.structuredContent.state).toBe("cleared");
    expect(crashed.structuredContent.error).toBe("Python worker crashed; variables cleared");
    expect(crashed.structuredContent.stderr).toContain("before-crash");
    const after = await h.run("'kept' in globals()");
    expect(after.value).toBe(false);
    expect(after.state_reset).toBe(true);
    expect(after.generation).toBe(2);
  });

  test("a timed-out Python-level sleep is interrupted and keeps the variables", async () => {
    await h.run("keep = 'me'");
    const timed = await h.run("import time\ntime.sleep(30)", { timeout: 0.5 });
    expect(timed.success).toBe(false);
    expect(timed.error).toBe("Execution timed out");
    expect(timed.state).toBe("preserved");
    expect(timed.elapsed_ms).toBeLessThan(10_000);
    const after = await h.run("keep");
    expect(after.value).toBe("me");
    expect(after.generation).toBe(1);
  });

  test("an awaited sleep past its timeout is interrupted too", async () => {
    const timed = await h.run("import asyncio\nawait asyncio.sleep(30)", { timeout: 0.5 });
    expect(timed.error).toBe("Execution timed out");
    expect(timed.state).toBe("preserved");
    expect((await h.run("await asyncio.sleep(0)\n7")).value).toBe(7);
  });

  test("a cell stuck in C code past its timeout is killed and the state cleared", async () => {
    await h.run("gone = 1");
    const timed = await h.run(STUCK_IN_C, { timeout: 0.5 });
    expect(timed.success).toBe(false);
    expect(timed.error).toBe("Execution timed out; worker did not stop; variables cleared");
    expect(timed.state).toBe("cleared");
    const after = await h.run("'gone' in globals()");
    expect(after.value).toBe(false);
    expect(after.state_reset).toBe(true);
  });

  test("reset restores variables, environment and cwd to launch state", async () => {
    await h.run("import os\nos.environ['REPL_RESET_PROBE'] = '1'\nos.chdir('/')\nleft = 1");
    const reset = await h.run(
      "import os\n[os.environ.get('REPL_RESET_PROBE'), os.getcwd(), 'left' in globals()]",
      {
        reset: true,
      },
    );
    expect(reset.value).toEqual([null, h.project, false]);
    expect(reset.state_reset).toBe(true);
    expect(reset.generation).toBe(2);
  });

  test("a stale expected_generation is refused before any code runs", async () => {
    await h.run("1");
    const marker = join(h.dir, "should-not-exist");
    const refused = await h.call("execute_python", {
      code: `open(${JSON.stringify(marker)}, 'w').write('ran')`,
      expected_generation: 7,
    });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent.error).toStartWith("STATE_CHANGED: stale expected_generation");
    expect(existsSync(marker)).toBe(false);
    const accepted = await h.run("2", { expected_generation: 1 });
    expect(accepted.value).toBe(2);
  });

  test("a worker that died is not silently replaced under an expected_generation", async () => {
    await h.run("import os");
    await h.call("execute_python", { code: "os._exit(1)" });
    const marker = join(h.dir, "after-restart");
    const refused = await h.call("execute_python", {
      code: `open(${JSON.stringify(marker)}, 'w').write('ran')`,
      expected_generation: 1,
    });
    expect(refused.structuredContent.error).toBe(
      "STATE_CHANGED: worker restarted; expected_generation no longer matches",
    );
    expect(refused.structuredContent.generation).toBe(2);
    expect(existsSync(marker)).toBe(false);
  });

  test("a line on the frame pipe that is not JSON, or is over 1 MiB, means the worker is broken", async () => {
    for (const payload of ["b'not json\\n'", "b'x' * 1_100_000"]) {
      await h.run("kept = 1");
      const broken = await h.run(
        `import os, sys\nos.write(sys.modules['__main__'].PROTOCOL_FD, ${payload})\nimport time\ntime.sleep(5)`,
      );
      expect(broken.error).toBe("Python worker crashed; variables cleared");
      expect(broken.state).toBe("cleared");
      const after = await h.run("'kept' in globals()");
      expect(after.value).toBe(false);
      expect(after.state_reset).toBe(true);
    }
  });

  test("a large environment reaches the worker whole (the guardian spec is written completely)", async () => {
    // 300 KB in all: more than a socket buffer holds, each variable under the OS's 128 KiB limit.
    const big = {
      REPL_BIG_A: "a".repeat(100_000),
      REPL_BIG_B: "b".repeat(100_000),
      REPL_BIG_C: "c".repeat(100_000),
    };
    const own = await Harness.start({ env: big });
    try {
      const sizes = await own.run(
        "import os\n[len(os.environ[name]) for name in ('REPL_BIG_A', 'REPL_BIG_B', 'REPL_BIG_C')]",
      );
      expect(sizes.value).toEqual([100_000, 100_000, 100_000]);
    } finally {
      await own.close();
    }
  });

  test("a cell that needs more than the code limit is refused", async () => {
    const big = await h.call("execute_python", { code: `# ${"é".repeat(140_000)}` });
    expect(big.isError).toBe(true);
    expect(big.structuredContent.error).toBe("Code limit is 256 KiB; timeout must be 0.01..3600 seconds");
  });
});
