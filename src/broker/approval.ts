// Which calls the person must approve before they are sent (the registry's `approve` field,
// docs/broker.md "Approvals"). The rule is read from the entry and the tool's own definition only, so
// the same call is judged the same way by every path that sends it (mcp.call, mcp.<server>.<tool>(),
// artifact_forward).
import { ReplError } from "../errors.ts";
import { APPROVAL_ARGUMENTS_MAX_CHARS, APPROVAL_SUMMARY_MAX_CHARS, SECRET_MIN_CHARS } from "../limits.ts";
import type { Question } from "../person/questions.ts";
import type { Tool } from "./catalogue.ts";
import type { ServerEntry } from "./config.ts";
import type { Verdict } from "./journal.ts";

/** `*` matches any run of characters, `?` one; everything else stands for itself. */
function globPattern(glob: string): RegExp {
  let source = "";
  for (const char of glob) {
    if (char === "*") source += ".*";
    else if (char === "?") source += ".";
    else source += char.replace(/[\\^$.|+()[\]{}]/g, "\\$&");
  }
  return new RegExp(`^${source}$`, "su");
}

const compiled = new WeakMap<string[], RegExp[]>();

export function needsApproval(entry: ServerEntry, tool: Tool): boolean {
  const rule = entry.approve;
  if (rule === undefined) return false;
  if (rule === "all") return true;
  // A tool counts as a write unless its server says it only reads.
  if (rule === "writes") return tool.annotations?.readOnlyHint !== true;
  let patterns = compiled.get(rule);
  if (!patterns) {
    patterns = rule.map(globPattern);
    compiled.set(rule, patterns);
  }
  return patterns.some((pattern) => pattern.test(tool.name));
}

/** The question put to the person: what would be sent, bounded, with the registry's secrets hidden. */
export function approvalQuestion(
  entry: ServerEntry,
  tool: Tool,
  args: Record<string, unknown>,
): Extract<Question, { kind: "approval" }> {
  const secrets = secretsOf(entry);
  const described = (tool.title ?? tool.description ?? "").trim().split("\n")[0] ?? "";
  let shown = hideSecrets(JSON.stringify(args), secrets);
  if (shown.length > APPROVAL_ARGUMENTS_MAX_CHARS)
    shown = `${shown.slice(0, APPROVAL_ARGUMENTS_MAX_CHARS)}… (${shown.length} characters in all)`;
  return {
    kind: "approval",
    server: entry.name,
    tool: tool.name,
    summary: hideSecrets(described, secrets).slice(0, APPROVAL_SUMMARY_MAX_CHARS),
    arguments: shown,
  };
}

/** The entry's secrets worth hiding, longest first (one that contains another is hidden whole). */
function secretsOf(entry: ServerEntry): string[] {
  return entry.secrets
    .filter((value) => value.length >= SECRET_MIN_CHARS)
    .sort((a, b) => b.length - a.length);
}

function hideSecrets(text: string, secrets: string[]): string {
  let shown = text;
  for (const secret of secrets) {
    shown = shown.split(secret).join("‹hidden›");
    // The JSON text escapes what the value may contain; hide that spelling too.
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) shown = shown.split(escaped).join("‹hidden›");
  }
  return shown;
}

/** What the agent reads when a call needed approval and did not get it; `verdict.decision` says why. */
export function notApproved(server: string, tool: string, verdict: Verdict): ReplError {
  const call = `${server}.${tool}`;
  switch (verdict.decision) {
    case "deny":
      return new ReplError(
        "APPROVAL_DENIED",
        `The person denied the call to ${call}; nothing was sent. Do not retry it: ask them what they want instead`,
      );
    case "timed_out":
      return new ReplError(
        "APPROVAL_REQUIRED",
        `Nobody answered the approval of ${call} in time (--approval-timeout-s); nothing was sent. Tell the person ` +
          "the call is waiting for them, then run the cell again",
      );
    case "cancelled":
      return new ReplError("CANCELLED", `The run ended while ${call} waited for approval; nothing was sent`);
    default:
      return new ReplError(
        "APPROVAL_REQUIRED",
        `Calling ${call} needs the person's approval (the registry's "approve" field for "${server}"), and ` +
          "nobody can be asked: this client did not declare MCP elicitation and no viewer page is open; nothing " +
          "was sent. Ask the person to open the viewer (repl-mcp --viewer) or to run the call themselves",
      );
  }
}
