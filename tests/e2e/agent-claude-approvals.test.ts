// Claude Code answers repl-mcp's approval without a person: its Elicitation hook (a command in --settings)
// accepts with allow_once, or declines, the form repl-mcp sends when a cell calls a tool the registry's
// `approve` names. The peer's log says whether the call was sent (exactly once, or never); the fake model
// API says what the model was shown; the hook's own log says what Claude Code handed it.
import { afterEach, expect, test } from "bun:test";
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runClaude } from "../support/agents/claude.ts";
import { inSession, type Step } from "../support/agents/script.ts";
import { tempDir } from "../support/harness.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";

const SCRIPT: Step[] = [
  { name: "health", tool: "python_health", args: () => ({}) },
  { name: "cell", tool: "execute_python", args: inSession(createIssueCell("from claude")) },
];

let dir: string;
const calls = new PeerCalls();
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  calls.remove();
});

async function play(hookOutput: object) {
  dir = tempDir("repl-mcp-claude-approve-");
  const hookLog = join(dir, "hook.jsonl");
  const registry = join(dir, "registry.json");
  writeFileSync(registry, JSON.stringify({ mcpServers: { typed: calls.entry({ approve: "writes" }) } }));
  const hook = join(dir, "hook.sh");
  writeFileSync(
    hook,
    `#!/bin/sh\ncat >> '${hookLog}'\necho >> '${hookLog}'\nprintf '%s' '${JSON.stringify(hookOutput)}'\n`,
  );
  chmodSync(hook, 0o755);
  const settings = {
    hooks: { Elicitation: [{ matcher: "repl", hooks: [{ type: "command", command: hook }] }] },
  };
  const run = await runClaude({ script: SCRIPT, serverArgs: ["--config", registry], settings });
  const sent = calls.tools().length;
  const asked = existsSync(hookLog)
    ? readFileSync(hookLog, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];
  return { run, sent, asked };
}

test("Claude Code's Elicitation hook allows once: the call is sent exactly once and the model sees it went", async () => {
  const { run, sent, asked } = await play({
    hookSpecificOutput: {
      hookEventName: "Elicitation",
      action: "accept",
      content: { decision: "allow_once" },
    },
  });
  expect(run.failure).toBeUndefined();
  expect(asked).toHaveLength(1);
  expect(asked[0].mcp_server_name).toBe("repl");
  expect(asked[0].message).toContain("typed.create_issue");
  expect(asked[0].requested_schema.required).toEqual(["decision"]);
  expect(sent).toBe(1);
  expect(run.seen.get("cell")?.text).toContain("sent");
  // Claude Code speaks 2026-07-28: the form came in an input_required result, the answer in its retry.
  const inputRequired = run.transcript.filter(
    (entry) => entry.from === "server" && (entry.message as any)?.result?.resultType === "input_required",
  );
  expect(inputRequired).toHaveLength(1);
  const retries = run.transcript.filter(
    (entry) => entry.from === "client" && (entry.message as any)?.params?.requestState !== undefined,
  );
  expect(retries).toHaveLength(1);
}, 180_000);

test("Claude Code's Elicitation hook declines: nothing is sent and the model sees APPROVAL_DENIED", async () => {
  const { run, sent, asked } = await play({
    hookSpecificOutput: { hookEventName: "Elicitation", action: "decline" },
  });
  expect(run.failure).toBeUndefined();
  expect(asked).toHaveLength(1);
  expect(sent).toBe(0);
  expect(run.seen.get("cell")?.text).toContain("APPROVAL_DENIED");
}, 180_000);
