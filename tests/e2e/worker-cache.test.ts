// The worker's cache (its source and the code compiled from it) is only used when it can be trusted:
// the directory must be ours, 0700 and not a link, and the compiled code must match the hash stored with
// it. Otherwise the code someone planted there would run as the user at the next worker start.
import { afterEach, expect, test } from "bun:test";
import { chmodSync, chownSync, cpSync, existsSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { Harness, REAL_PYTHON, tempDir, waitFor } from "../support/harness.ts";
import { run } from "../support/run.ts";

let harnesses: Harness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.map((harness) => harness.close()));
  harnesses = [];
});

async function start(cacheHome: string) {
  const harness = await Harness.start({ env: { XDG_CACHE_HOME: cacheHome } });
  harnesses.push(harness);
  return harness;
}

/** A cache directory as one worker start leaves it: the source and its compiled code. */
async function populated(): Promise<{ dir: string; code: string }> {
  const cacheHome = tempDir("repl-mcp-cache-");
  const harness = await start(cacheHome);
  expect((await harness.run("1 + 1")).value).toBe(2);
  const dir = join(cacheHome, "repl-mcp");
  const code = readdirSync(dir).find((name) => name.endsWith(".code"));
  expect(code).toBeDefined();
  return { dir, code: code as string };
}

/** Replaces a compiled worker with code that leaves a marker and exits, as an attacker's would. */
async function plant(path: string, marker: string): Promise<void> {
  const evil = `open(${JSON.stringify(marker)}, 'w').write('ran')\nimport os\nos._exit(3)\n`;
  const script = `import marshal, sys\nopen(sys.argv[1], 'wb').write(marshal.dumps(compile(sys.argv[2], 'x', 'exec')))`;
  const result = await run([REAL_PYTHON, "-c", script, path, evil], { timeoutMs: 10_000 });
  expect(result.code).toBe(0);
  chmodSync(path, 0o600);
}

test("compiled code that does not match its hash is compiled again, never run", async () => {
  const { dir, code } = await populated();
  const marker = join(tempDir(), "planted-ran");
  await plant(join(dir, code), marker);
  const planted = readFileSync(join(dir, code));

  const harness = await start(join(dir, ".."));
  expect((await harness.run("6 * 7")).value).toBe(42);
  expect(existsSync(marker)).toBe(false);
  // The cache was repaired: the next worker starts from code that verifies.
  expect(readFileSync(join(dir, code)).equals(planted)).toBe(false);
  expect((await harness.run("import os; os._exit(0)")).success).toBe(false);
  expect((await harness.run("'again'")).value).toBe("again");
  expect(existsSync(marker)).toBe(false);
}, 60_000);

const untrusted: [string, (dir: string) => string, string][] = [
  [
    "a directory others may write",
    (dir) => {
      chmodSync(dir, 0o777);
      return dir;
    },
    "must have permissions 0700",
  ],
  [
    "a symbolic link",
    (dir) => {
      const link = join(tempDir("repl-mcp-cache-"), "repl-mcp");
      symlinkSync(dir, link);
      return link;
    },
    "must be a real directory, not a file or a link",
  ],
  [
    "another user's directory",
    (dir) => {
      chownSync(dir, 65_534, 65_534);
      return dir;
    },
    "must be owned by the user running repl-mcp",
  ],
];

for (const [what, spoil, reason] of untrusted) {
  test(`a cache that is ${what} is not used: the worker runs from a private one`, async () => {
    if (what.startsWith("another user") && process.getuid?.() !== 0) {
      console.warn("skipped: only root can give a directory away");
      return;
    }
    const good = await populated();
    // What an attacker prepares: the genuine source beside planted code, in a directory they control.
    const dir = join(tempDir("repl-mcp-cache-"), "repl-mcp");
    cpSync(good.dir, dir, { recursive: true });
    const marker = join(tempDir(), "planted-ran");
    await plant(join(dir, good.code), marker);
    const cache = spoil(dir);

    const harness = await start(join(cache, ".."));
    expect((await harness.run("6 * 7")).value).toBe(42);
    expect(existsSync(marker)).toBe(false);
    const warning = `The cache directory ${cache} ${reason}`;
    await waitFor(() => harness.stderr.includes(warning), { what: "the warning on stderr" });
  }, 60_000);
}
