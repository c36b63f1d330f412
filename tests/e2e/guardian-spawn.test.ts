// Issue 12, defect 8: telling a guardian what to start never blocks the server. The server's
// environment is made large (~660 KB), so the command spec does not fit the control socket at once;
// the new guardian is frozen (SIGSTOP) before it reads it. The server must keep answering meanwhile,
// and give up on that guardian after its 5 s deadline with a clear error and no process left.
import { afterEach, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { waitFor } from "../support/harness.ts";
import { RawServer } from "../support/raw.ts";

let s: RawServer | undefined;
const frozenPids: number[] = [];
afterEach(async () => {
  // A frozen process cannot react to its lifeline closing: never leave one behind.
  for (const pid of frozenPids.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  await s?.close();
  s = undefined;
});

const BIG_ENV = Object.fromEntries(
  Array.from({ length: 6 }, (_, i) => [`REPL_TEST_BIG_${i}`, String(i).repeat(110_000)]),
);

function childrenOf(pid: number): number[] {
  const found: number[] = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
      if (text) found.push(...text.split(/\s+/).map(Number));
    }
  } catch {
    // The server is gone.
  }
  return found;
}

function state(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  } catch {
    return "gone";
  }
}

function isGuardian(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").includes("--internal-guardian");
  } catch {
    return false;
  }
}

/**
 * Freezes the server's next guardian as soon as it runs the guardian code, before it can read its
 * spec. (Not earlier: a child stopped before its exec would hold the server inside vfork.)
 */
async function freezeNextGuardian(server: RawServer, known: Set<number>): Promise<number> {
  for (;;) {
    const fresh = childrenOf(server.proc.pid).find((pid) => !known.has(pid) && isGuardian(pid));
    if (fresh !== undefined) {
      process.kill(fresh, "SIGSTOP");
      frozenPids.push(fresh);
      return fresh;
    }
    if (!server.alive) throw new Error("server exited");
    await Bun.sleep(0);
  }
}

test("a guardian that does not read its command neither blocks the server nor outlives the deadline", async () => {
  // Catching the guardian before it reads is a race we usually win; a lost race is retried, not failed.
  for (let attempt = 0; attempt < 5; attempt++) {
    s = await RawServer.start({ env: BIG_ENV });
    const frozen = freezeNextGuardian(s, new Set(childrenOf(s.proc.pid)));
    s.send({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name: "execute_python",
        arguments: { code: "import os\nlen(os.environ['REPL_TEST_BIG_5'])" },
      },
    });
    const guardian = await frozen;
    await waitFor(() => state(guardian) === "T", { timeoutMs: 5_000, what: "the guardian to stop" });

    // The server answers while the guardian sits frozen with its command unread.
    const health = await s.request("tools/call", { name: "python_health", arguments: {} }, 3_000);
    expect(health.result.structuredContent.server.session_id).toBeString();
    expect(state(guardian)).toBe("T");

    const failed = await s.waitMessage((message) => message.id === 1, 20_000);
    const error: string = failed.result.structuredContent.error ?? "";
    if (error.includes("startup timed out") || failed.result.isError !== true) {
      // The guardian had read its whole command just before it was frozen (and maybe even reported the
      // worker it started, so the cell ran): the race was lost.
      await s.close();
      s = undefined;
      continue;
    }
    // Past the deadline the server gave up on it: a clear error, the frozen guardian killed.
    expect(failed.result.isError).toBe(true);
    expect(error).toContain("guardian took none of its command");
    await waitFor(() => state(guardian) === "gone", { timeoutMs: 5_000, what: "the frozen guardian to die" });

    // The next cell starts normally, and nothing of the failed attempt is left.
    const cell = await s.run("import os\nlen(os.environ['REPL_TEST_BIG_5'])");
    expect(cell.value).toBe(110_000);
    expect(s.children().length).toBe(2);
    return;
  }
  throw new Error("never caught a guardian before it read its command");
}, 120_000);
