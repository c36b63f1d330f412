// The journal's bounds and its durable writer, without a server: eviction by count and by bytes, the
// refusal when every record is in flight, and many concurrent changes landing in one consistent file.
import { afterEach, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Journal } from "../../src/broker/journal.ts";
import { openDurableJournal } from "../../src/broker/journal-file.ts";
import { tempDir } from "../support/harness.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const call = (project = "/p") => ({ session_id: "s", project, run_id: null, server: "peer", tool: "echo" });

test("the oldest finished records make room, by count and by serialized size", () => {
  const journal = new Journal();
  const first = journal.dispatched(call());
  journal.finish(first, "completed");
  for (let i = 0; i < 300; i++) journal.finish(journal.dispatched(call()), "completed");
  expect(journal.size).toBe(256);
  expect(journal.list().some((record) => record.id === first.id)).toBe(false);

  const wide = new Journal();
  for (let i = 0; i < 256; i++) wide.finish(wide.dispatched(call("/x".repeat(2048))), "tool_error");
  expect(wide.size).toBeLessThan(256);
  const bytes = Buffer.byteLength(JSON.stringify(wide.list()));
  expect(bytes).toBeLessThanOrEqual(900_000);
  // Full: one more record of that size would not have fitted.
  expect(bytes + Buffer.byteLength(JSON.stringify(wide.list()[0])) + 1).toBeGreaterThan(900_000);
});

test("when every record is a call in flight, a new call is refused before dispatch", () => {
  const journal = new Journal();
  for (let i = 0; i < 256; i++) journal.dispatched(call());
  expect(() => journal.dispatched(call())).toThrow("MCP journal is full of calls in flight");
  expect(journal.size).toBe(256);
});

test("concurrent changes are all made durable, and the file ends equal to the journal", async () => {
  const dir = tempDir("repl-mcp-journal-unit-");
  dirs.push(dir);
  const path = join(dir, "journal.json");
  const journal = openDurableJournal(path);
  const records = Array.from({ length: 40 }, () => journal.dispatched(call()));
  await Promise.all(records.map(() => journal.persisted()));
  expect(JSON.parse(readFileSync(path, "utf8"))).toHaveLength(40);
  for (const [index, record] of records.entries()) {
    journal.finish(record, index % 2 ? "completed" : "tool_error");
  }
  await Promise.all(records.map(() => journal.persisted()));
  expect(JSON.parse(readFileSync(path, "utf8"))).toEqual(journal.list());
  expect(() => openDurableJournal(path)).toThrow("Broker journal is already owned by another runtime");
});
