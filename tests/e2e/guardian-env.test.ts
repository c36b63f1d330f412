// The guardian runs with JavaScriptCore options of its own (no JIT: it is small and mostly waits).
// They must stay in the guardian: the worker gets exactly the server's environment, including any
// BUN_JSC_ variable the user set on purpose.
import { afterEach, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { Harness } from "../support/harness.ts";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function environOf(pid: number): Record<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").filter(Boolean);
  return Object.fromEntries(
    entries.map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
  );
}

function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

test("the guardian's JIT switch never reaches the worker", async () => {
  h = await Harness.start();
  const cell = await h.run("import os\n[os.environ.get('BUN_JSC_useJIT'), os.getpid()]");
  const [seen, workerPid] = cell.value as [string | null, number];
  expect(seen).toBeNull();
  // The switch is really in place: the worker's parent is its guardian, started without a JIT.
  const guardian = parentOf(workerPid);
  expect(readFileSync(`/proc/${guardian}/cmdline`, "latin1").split("\0")).toContain("--internal-guardian");
  expect(environOf(guardian).BUN_JSC_useJIT).toBe("0");
});

test("a BUN_JSC_ variable the user set reaches the worker unchanged", async () => {
  h = await Harness.start({ env: { BUN_JSC_useJIT: "1", BUN_JSC_useDFGJIT: "1" } });
  const cell = await h.run(
    "import os\n[os.environ.get('BUN_JSC_useJIT'), os.environ.get('BUN_JSC_useDFGJIT')]",
  );
  expect(cell.value).toEqual(["1", "1"]);
});
