// Opening a session on an interpreter whose probe hangs: the probe's deadline (10 s), and the cap on
// probes under way. Both tests wait the deadline out, so they run side by side, each on its own server.
// runner: waiting lane
import { afterAll, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, waitFor } from "../support/harness.ts";

const started: Harness[] = [];
afterAll(async () => {
  await Promise.all(started.map((harness) => harness.close()));
});

async function start(): Promise<Harness> {
  const harness = await Harness.start();
  started.push(harness);
  return harness;
}

/** An interpreter that never answers the probe. */
function hanging(dir: string): string {
  const path = join(dir, "hang");
  writeFileSync(path, "#!/bin/sh\nexec sleep 60\n");
  chmodSync(path, 0o755);
  return path;
}

test.concurrent("a hanging probe times out within 13 s and leaves no process", async () => {
  const h = await start();
  const hang = hanging(h.dir);
  const began = performance.now();
  const result = await h.call("python_session_open", { name: "hang", project: h.project, python: hang });
  expect(performance.now() - began).toBeLessThan(13_000);
  expect(result.structuredContent.error).toBe("Interpreter probe timed out");
  await waitFor(() => h.children().length === 0, { timeoutMs: 2_000, what: "the probe to be gone" });
}, 30_000);

test.concurrent("four hanging opens: health still answers at once and a fifth open reports capacity", async () => {
  const h = await start();
  const hang = hanging(h.dir);
  const pending = [1, 2, 3, 4].map((i) =>
    h.call("python_session_open", { name: `hang${i}`, project: h.project, python: hang }),
  );
  await waitFor(() => h.children().length >= 8, { timeoutMs: 10_000, what: "four probes" });
  const began = performance.now();
  await h.health();
  expect(performance.now() - began).toBeLessThan(3_000);
  const fifth = await h.call("python_session_open", { name: "fifth", project: h.project });
  expect(fifth.structuredContent.error).toBe(
    "Session opening capacity exhausted; wait for active interpreter probes",
  );
  for (const result of await Promise.all(pending)) {
    expect(result.structuredContent.error).toBe("Interpreter probe timed out");
  }
}, 30_000);
