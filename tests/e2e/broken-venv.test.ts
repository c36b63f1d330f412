// Issue 12, defect 3: a project .venv that exists but has no usable interpreter is refused with an
// interpreter error naming the Python executable, and never falls back to another interpreter; an
// explicit python still opens the project.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, REAL_PYTHON } from "../support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

const BROKEN: Record<string, (venv: string) => void> = {
  "an empty bin/": (venv) => mkdirSync(join(venv, "bin"), { recursive: true }),
  "a dangling python link": (venv) => {
    mkdirSync(join(venv, "bin"), { recursive: true });
    symlinkSync("/no/such/python3.99", join(venv, "bin", "python"));
  },
  "a python that is not executable": (venv) => {
    mkdirSync(join(venv, "bin"), { recursive: true });
    writeFileSync(join(venv, "bin", "python"), "#!/bin/sh\n", { mode: 0o644 });
  },
  ".venv itself a dangling symlink": (venv) => symlinkSync("/no/such/venv", venv),
  ".venv a plain file": (venv) => writeFileSync(venv, "not a venv"),
};

test.each(Object.keys(BROKEN))("%s: refused, no fallback; an explicit python still works", async (label) => {
  const project = join(h.dir, label.replace(/[^a-z]+/g, "-"));
  mkdirSync(project);
  BROKEN[label]?.(join(project, ".venv"));
  const refused = await h.call("python_session_open", { name: "venv", project });
  expect(refused.isError).toBe(true);
  expect(refused.structuredContent.error).toContain("Python executable");
  expect(refused.structuredContent.error).toContain(".venv");
  expect(refused.structuredContent.environment).toBeUndefined();
  const listed = (await h.call("python_session_list")).structuredContent.sessions;
  expect(listed.map((session: { name: string }) => session.name)).toEqual(["default"]);

  const explicit = await h.call("python_session_open", { name: "explicit", project, python: REAL_PYTHON });
  expect(explicit.isError).toBe(false);
  expect(explicit.structuredContent.environment.source).toBe("explicit");
  const cell = await h.run("import sys\nsys.executable", {
    session_id: explicit.structuredContent.session_id,
  });
  expect(cell.success).toBe(true);
  await h.call("python_session_close", { session_id: explicit.structuredContent.session_id });
});
