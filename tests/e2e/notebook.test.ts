// export_notebook() through the system interpreter, checked with Debian's python3-nbformat (schema
// validation) and python3-nbconvert with python3-ipykernel (rerunning the exported notebook). Without
// them these tests skip and say why.
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, SessionClient } from "../support/harness.ts";
import { run } from "../support/run.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";

function missing(modules: string, packages: string): string | undefined {
  try {
    const probe = Bun.spawnSync([SYSTEM_PYTHON, "-c", `import ${modules}`], { stderr: "pipe" });
    if (probe.exitCode === 0) return undefined;
    return `${SYSTEM_PYTHON} cannot import ${modules} (install ${packages})`;
  } catch {
    return `${SYSTEM_PYTHON} does not exist`;
  }
}

const reason = missing("nbformat, matplotlib", "python3-nbformat and python3-matplotlib");
const rerunReason = reason ?? missing("nbconvert, ipykernel", "python3-nbconvert and python3-ipykernel");
if (reason) console.warn(`skipping notebook tests: ${reason}`);
else if (rerunReason) console.warn(`skipping the notebook rerun test: ${rerunReason}`);
const real = test.skipIf(reason !== undefined);
const rerunnable = test.skipIf(rerunReason !== undefined);

// One server for the file; each test exports a session of its own, opened on the system interpreter.
let server: Harness | undefined;
let h: SessionClient;
beforeAll(async () => {
  if (!reason) server = await Harness.start();
});
afterAll(async () => {
  await server?.close();
});
beforeEach(async () => {
  if (server) h = await SessionClient.open(server, { python: SYSTEM_PYTHON });
});
afterEach(async () => {
  if (server) await h.close();
});

async function cells(...codes: string[]) {
  const results = [];
  for (const code of codes) results.push(await h.run(code));
  return results;
}

/** nbformat's own reading and validation of a notebook file: its error, or "valid". */
async function validate(path: string): Promise<string> {
  const script =
    "import sys, nbformat\nnb = nbformat.read(sys.argv[1], as_version=4)\nnbformat.validate(nb)\nprint('valid')";
  const checked = await run([SYSTEM_PYTHON, "-c", script, path], { env: h.harness.env(), timeoutMs: 60_000 });
  return (checked.stdout + checked.stderr).trim();
}

real("a session becomes a valid notebook with each run's source and outputs", async () => {
  const ran = await cells(
    "x = 21\nprint(x * 2)",
    "import sys\nprint('careful', file=sys.stderr)\nx",
    "1 / 0",
    "import pandas as pd\npd.DataFrame({'a': [1, 2]})",
    "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()",
  );
  const exported = await h.run("export_notebook('session.ipynb')");
  expect(exported.success).toBe(true);
  expect(exported.value).toEqual({
    path: join(h.project, "session.ipynb"),
    format: "ipynb",
    cells: 5,
    missing: 0,
  });
  expect(await validate(join(h.project, "session.ipynb"))).toBe("valid");

  const notebook = JSON.parse(readFileSync(join(h.project, "session.ipynb"), "utf8"));
  const version = (await h.run("import platform\nplatform.python_version()")).value;
  expect(notebook.nbformat).toBe(4);
  expect(notebook.metadata.kernelspec).toMatchObject({ name: "python3", language: "python" });
  expect(notebook.metadata.language_info).toMatchObject({ name: "python", version });
  // One code cell per run, in order, without the cell that exported.
  expect(notebook.cells.map((cell: any) => cell.id)).toEqual(ran.map((result) => result.run_id));
  const [printed, warned, failed, frame, plotted] = notebook.cells;
  expect(printed.source.join("")).toBe("x = 21\nprint(x * 2)");
  expect(printed.outputs).toEqual([{ output_type: "stream", name: "stdout", text: ["42\n"] }]);
  expect(warned.outputs[0]).toEqual({ output_type: "stream", name: "stderr", text: ["careful\n"] });
  expect(warned.outputs[1]).toMatchObject({ output_type: "execute_result", data: { "text/plain": ["21"] } });
  expect(failed.outputs).toEqual([
    {
      output_type: "error",
      ename: "ZeroDivisionError",
      evalue: "division by zero",
      traceback: String(ran[2]?.error).split("\n"),
    },
  ]);
  expect(frame.outputs[0].data["text/plain"].join("")).toBe(ran[3]?.return_value);
  expect(plotted.outputs.length).toBe(1);
  expect(plotted.outputs[0].output_type).toBe("display_data");
  const png = Buffer.from(plotted.outputs[0].data["image/png"], "base64");
  expect(png.subarray(1, 4).toString()).toBe("PNG");
});

real("a percent-format script: one # %% cell per run, failures in comments", async () => {
  await cells("a = 1", "print(a)", "raise KeyError('nope')");
  const exported = await h.run("export_notebook('session.py')");
  expect(exported.value).toMatchObject({ format: "py", cells: 3, missing: 0 });
  const script = readFileSync(join(h.project, "session.py"), "utf8");
  expect(script.split("\n# %%\n").slice(1)).toEqual([
    "a = 1\n",
    "print(a)\n",
    "raise KeyError('nope')\n# Failed: KeyError: 'nope'\n",
  ]);
  // It is Python: it compiles, and the failure notes are comments.
  const compiled = await run([
    SYSTEM_PYTHON,
    "-c",
    "import sys; compile(open(sys.argv[1]).read(), 'x', 'exec')",
    join(h.project, "session.py"),
  ]);
  expect(compiled.code).toBe(0);
});

real("a saved file's exit status is noted as the worker's own error, with no class of ours", async () => {
  writeFileSync(join(h.project, "exits.py"), "import sys\nsys.exit(3)\n");
  const ran = await h.call("python_execute_file", {
    path: "exits.py",
    mode: "persistent",
  });
  expect(ran.isError).toBe(true);
  expect((await h.run("export_notebook('exits-session.py')")).success).toBe(true);
  const script = readFileSync(join(h.project, "exits-session.py"), "utf8");
  expect(script).toContain("# Failed: Error: Saved Python file exited with status 3\n");
  expect(script).not.toContain("_PlainFailure");
});

real("relative paths follow os.chdir; an existing file is kept unless overwrite=True", async () => {
  await cells("import os\nos.mkdir('out')\nos.chdir('out')", "value = 7");
  const first = await h.run("export_notebook('n.ipynb')");
  expect(first.value.path).toBe(join(h.project, "out", "n.ipynb"));
  writeFileSync(join(h.project, "out", "n.ipynb"), "mine");
  const refused = await h.run("export_notebook('n.ipynb')");
  expect(refused.success).toBe(false);
  expect(refused.error).toContain(
    `FileExistsError: ${join(h.project, "out", "n.ipynb")} exists; pass overwrite=True`,
  );
  expect(readFileSync(join(h.project, "out", "n.ipynb"), "utf8")).toBe("mine");
  const replaced = await h.run("export_notebook('n.ipynb', overwrite=True)");
  expect(replaced.success).toBe(true);
  expect(await validate(join(h.project, "out", "n.ipynb"))).toBe("valid");
  const wrong = await h.run("export_notebook('n.txt')");
  expect(wrong.error).toContain(
    "ValueError: export_notebook() writes a .ipynb notebook or a .py percent script",
  );
  expect(existsSync(join(h.project, "out", "n.txt"))).toBe(false);
  // The writes were atomic: no temporary file is left beside the notebook.
  expect(readdirSync(join(h.project, "out")).sort()).toEqual(["n.ipynb"]);
});

real("runs that fell out of the history are counted in a note at the top", async () => {
  // 70 runs, then the export: the history keeps the last 64 runs, the export's among them.
  await h.run("counter = 0");
  for (let i = 1; i < 70; i++) await h.run(`counter += ${i}`);
  const exported = await h.run("export_notebook('long.ipynb')");
  expect(exported.value).toMatchObject({ cells: 63, missing: 7 });
  const notebook = JSON.parse(readFileSync(join(h.project, "long.ipynb"), "utf8"));
  expect(notebook.cells[0].cell_type).toBe("markdown");
  expect(notebook.cells[0].source).toContain("7 earlier runs of this session are not here");
  expect(notebook.cells[1].source.join("")).toBe("counter += 7");
  expect(notebook.cells[1].execution_count).toBe(8);
  expect(await validate(join(h.project, "long.ipynb"))).toBe("valid");
  await h.run("export_notebook('long.py')");
  expect(readFileSync(join(h.project, "long.py"), "utf8")).toContain(
    "# 8 earlier runs of this session are not here",
  );
});

rerunnable("nbconvert reruns an exported session and prints the same output", async () => {
  const ran = await cells(
    "import math\nvalues = [math.factorial(n) for n in range(8)]",
    "for v in values:\n    print(v)",
    "total = sum(values)\nprint('total', total)\ntotal",
    "def greet(name):\n    return f'hello {name}'\nprint(greet('notebook'))",
  );
  expect(ran.every((result) => result.success)).toBe(true);
  await h.run("export_notebook('rerun.ipynb')");
  const rerun = await run(
    [
      SYSTEM_PYTHON,
      "-m",
      "nbconvert",
      "--to",
      "notebook",
      "--execute",
      "--output",
      "again.ipynb",
      join(h.project, "rerun.ipynb"),
    ],
    { cwd: h.project, env: h.harness.env(), timeoutMs: 180_000 },
  );
  expect(rerun.code).toBe(0);
  const again = JSON.parse(readFileSync(join(h.project, "again.ipynb"), "utf8"));
  const stdoutOf = (cell: any) =>
    cell.outputs
      .filter((output: any) => output.output_type === "stream" && output.name === "stdout")
      .map((output: any) => (Array.isArray(output.text) ? output.text.join("") : output.text))
      .join("");
  expect(again.cells.map(stdoutOf)).toEqual(ran.map((result) => result.stdout));
  expect(again.cells.map(stdoutOf).join("")).toContain("total 5914");
});
