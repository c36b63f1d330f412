// A smoke subset on every other CPython >= 3.10 this machine has (pyenv versions, python3.X on PATH).
import { expect, test } from "bun:test";
import { existsSync, readdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { Harness } from "../support/harness.ts";

function interpreters(): string[] {
  const found = new Map<string, string>();
  const add = (path: string) => {
    if (!existsSync(path)) return;
    const real = realpathSync(path);
    if (!found.has(real)) found.set(real, path);
  };
  const pyenv = join(process.env.PYENV_ROOT ?? join(process.env.HOME ?? "/root", ".pyenv"), "versions");
  if (existsSync(pyenv)) {
    for (const version of readdirSync(pyenv)) {
      const match = /^3\.(\d+)\.\d+$/.exec(version);
      if (match && Number(match[1]) >= 10) add(join(pyenv, version, "bin", "python3"));
    }
  }
  for (let minor = 10; minor <= 14; minor++) {
    const onPath = Bun.which(`python3.${minor}`);
    // pyenv shims only work for the active version; the versions themselves were added above.
    if (onPath && !onPath.includes("/shims/")) add(onPath);
  }
  return [...found.values()];
}

const found = interpreters();

test("at least one CPython >= 3.10 is available", () => {
  expect(found.length).toBeGreaterThan(0);
});

for (const python of found) {
  test(`smoke on ${python}`, async () => {
    const h = await Harness.start({ args: ["--python", python] });
    try {
      const version = await h.run("import sys\nx = 20\nlist(sys.version_info[:2])");
      expect(version.success).toBe(true);
      expect(version.value[0]).toBe(3);
      expect(version.value[1]).toBeGreaterThanOrEqual(10);
      expect((await h.run("import asyncio\nawait asyncio.sleep(0)\nx * 2 + 2")).value).toBe(42);
      const failed = await h.run("def f():\n    raise ValueError('nope')\nf()");
      expect(failed.error).toContain("ValueError: nope");
      expect(failed.error).toContain("raise ValueError('nope')");
      const timed = await h.run("import time\ntime.sleep(30)", { timeout: 0.3 });
      expect(timed.error).toBe("Execution timed out");
      expect((await h.run("x")).value).toBe(20);
    } finally {
      await h.close();
    }
  });
}
