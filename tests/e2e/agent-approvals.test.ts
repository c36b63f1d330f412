// What Codex and Gemini CLI do with repl-mcp's approval of a tool called from a cell, pinned: Codex
// (`codex exec`, 2025-06-18) declares form elicitation, gets the form and declines it with nobody to ask,
// so the call is denied; Gemini CLI declares no elicitation, so nobody can be asked and the call is refused
// with APPROVAL_REQUIRED at once. Either way the peer receives nothing. (Claude Code, which answers through
// its hooks, is agent-claude-approvals.test.ts.)
import { afterEach, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Transcript } from "../support/agents/client.ts";
import { runCodexSession } from "../support/agents/codex.ts";
import { runGeminiOn } from "../support/agents/gemini.ts";
import { inSession, type Step, SYSTEM_PYTHON } from "../support/agents/script.ts";
import { BINARY, tempDir } from "../support/harness.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";

const SCRIPT: Step[] = [
  { name: "health", tool: "python_health", args: () => ({}) },
  { name: "cell", tool: "execute_python", args: inSession(createIssueCell("from an agent")) },
];

let dir: string;
const calls = new PeerCalls();
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  calls.remove();
});

function server() {
  dir = tempDir("repl-mcp-agent-approve-");
  const registry = join(dir, "registry.json");
  writeFileSync(registry, JSON.stringify({ mcpServers: { typed: calls.entry({ approve: "writes" }) } }));
  const sent = () => calls.tools().length;
  return { command: [BINARY, "--python", SYSTEM_PYTHON, "--config", registry], sent };
}

const declared = (transcript: Transcript) =>
  (
    transcript.find((entry) => entry.from === "client" && (entry.message as any)?.method === "initialize")
      ?.message as any
  )?.params?.capabilities;

test("Codex declares form elicitation, gets the form, and declines it: APPROVAL_DENIED, nothing sent", async () => {
  const { command, sent } = server();
  const run = await runCodexSession({ script: SCRIPT, server: command });
  expect(declared(run.transcript)?.elicitation).toHaveProperty("form");
  const asked = run.transcript.find(
    (entry) => entry.from === "server" && (entry.message as any)?.method === "elicitation/create",
  )?.message as any;
  expect(asked?.params.message).toContain("typed.create_issue");
  const answer = run.transcript.find(
    (entry) =>
      entry.from === "client" &&
      (entry.message as any)?.id === asked?.id &&
      "result" in (entry.message as any),
  )?.message as any;
  expect(["decline", "cancel"]).toContain(answer?.result?.action);
  expect(run.seen.get("cell")?.text).toContain("APPROVAL_DENIED");
  expect(sent()).toBe(0);
}, 180_000);

test("Gemini CLI declares no elicitation: refused with APPROVAL_REQUIRED at once, nothing sent", async () => {
  const { command, sent } = server();
  const run = await runGeminiOn({ script: SCRIPT, server: "repl", command });
  expect(declared(run.transcript)?.elicitation).toBeUndefined();
  expect(run.transcript.some((entry) => JSON.stringify(entry.message).includes("elicitation/create"))).toBe(
    false,
  );
  expect(run.seen.get("cell")?.text).toContain("APPROVAL_REQUIRED");
  expect(sent()).toBe(0);
}, 180_000);
