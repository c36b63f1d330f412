// A client's scope over a long stdio life: it must remember the sessions whose journal records it may
// still list, and only those, so opening and closing sessions for days costs no memory per session.
// What a scope remembers is not visible from outside the server, so this runs the server's own pool and
// scope in process; every session it opens probes a real python3, as the binary's would.
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { JOURNAL_MAX_RECORDS } from "../../src/limits.ts";
import { Sessions } from "../../src/sessions/registry.ts";
import { SessionScope } from "../../src/sessions/scope.ts";
import { tempDir } from "../support/harness.ts";

const project = tempDir("scope-");
afterAll(() => rmSync(project, { recursive: true, force: true }));

const python = Bun.which("python3") ?? "/usr/bin/python3";
const pool = new Sessions({
  project,
  interpreter: { path: python, source: "path" },
  maxMemoryMib: 0,
  approvalTimeoutMs: 300_000,
  configPath: undefined,
  scopes: new Set(),
});
afterAll(() => pool.shutdown());

const call = (session_id: string) => ({ session_id, project, run_id: null, server: "peer", tool: "write" });

test("closed sessions are forgotten once the journal holds nothing of theirs", async () => {
  const scope = new SessionScope(pool, { earlierJournal: true });
  const withRecords: string[] = [];
  for (let i = 0; i < 40; i++) {
    const session = await scope.open(`s${i}`, project, python, undefined);
    if (i % 10 === 0) {
      pool.journal.finish(pool.journal.dispatched(call(session.id)), "completed");
      withRecords.push(session.id);
    }
    await scope.close(session.id);
  }
  // The default session, and the four closed ones whose records the client may still list.
  expect(scope.knownSessions).toBe(1 + withRecords.length);
  const view = pool.journal.visibleTo(() => true, false).map((record) => record.session_id);
  expect(view).toEqual(withRecords);
  expect(scope.journalRecords).toBe(withRecords.length);

  // The default session's calls push those records out of the bounded journal: nothing is left to see.
  for (let i = 0; i < JOURNAL_MAX_RECORDS; i++) {
    pool.journal.finish(pool.journal.dispatched(call(scope.default.id)), "completed");
  }
  const last = await scope.open("last", project, python, undefined);
  await scope.close(last.id);
  expect(scope.knownSessions).toBe(1);
  expect(scope.journalRecords).toBe(JOURNAL_MAX_RECORDS);
  await scope.end();
}, 120_000);
