// Which calls the person must approve before they are sent (the registry's `approve` field,
// docs/broker.md "Approvals"). The rule is read from the entry and the tool's own definition only, so
// the same call is judged the same way by every path that sends it (mcp.call, mcp.<server>.<tool>(),
// artifact_forward).
import type { Tool } from "./catalogue.ts";
import type { ServerEntry } from "./config.ts";

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

/** What the agent reads when a call needs approval that nobody can give. */
export function approvalRequired(server: string, tool: string): string {
  return (
    `Calling ${server}.${tool} needs the person's approval (the registry's "approve" field for "${server}"), ` +
    "and this repl-mcp has no way to ask them yet; nothing was sent. Tell the person which call you " +
    'want to make: they can run it themselves, or remove the tool from "approve" in the registry, then mcp.refresh()'
  );
}
