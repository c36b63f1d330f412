// Issue 12, defect 6: cells whose JSON escaping makes them large. Over stdio the client's own message
// is escaped the same way and carries more envelope than our worker frame, so a cell whose frame would
// pass 1 MiB already passes the 1 MiB message limit: it is refused at the line, clearly, with nothing
// run. A cell just inside the limit runs normally. (That the supervisor refuses an oversized frame
// rather than failing mid-dispatch is covered in tests/unit/execute-frame.test.ts.)
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { RawServer } from "../support/raw.ts";

let s: RawServer;
beforeAll(async () => {
  s = await RawServer.start();
});
afterAll(async () => {
  await s.close();
});

function escapedCell(marker: string, controls: number): string {
  return `open(${JSON.stringify(marker)}, "w").write("ran")\nblob = "${"\u0001".repeat(controls)}"\nlen(blob)`;
}

test("a cell whose escaped form is over 1 MiB is refused with the limit named; nothing runs", async () => {
  const before = await s.run("kept = 'still here'\nimport os\nos.getpid()");
  const marker = join(s.project, "ran.txt");
  const code = escapedCell(marker, 200_000);
  expect(new TextEncoder().encode(code).length).toBeLessThanOrEqual(262_144);

  const id = 77;
  s.send({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name: "execute_python", arguments: { code } },
  });
  const refusal = await s.waitMessage((message) => message.id === null && message.error);
  expect(refusal.error.code).toBe(-32600);
  expect(refusal.error.message).toContain("1048576");
  expect(s.messages.some((message) => message.id === id)).toBe(false);
  expect(existsSync(marker)).toBe(false);

  const after = await s.run("import os\n[kept, os.getpid()]");
  expect(after.value).toEqual(["still here", before.value]);
  expect(after.generation).toBe(before.generation);
}, 30_000);

test("a cell of escaped characters just inside the limit runs", async () => {
  const marker = join(s.project, "inside.txt");
  const result = await s.run(escapedCell(marker, 170_000));
  expect(result.success).toBe(true);
  expect(result.value).toBe(170_000);
  expect(existsSync(marker)).toBe(true);
  expect(s.corrupt).toEqual([]);
}, 30_000);
