// Which result style a client gets: the one place that tells clients apart (docs/clients.md).
//
// `structured` is the contract's shape: every tool declares its outputSchema and every result carries
// structuredContent beside a text block. A generic MCP client (the SDK's Client, the Inspector, another
// repl-mcp's broker, the reference's test suite) always gets it.
//
// `text` is for agent clients that put only part of a result in front of their model: Claude Code and
// Codex show the model structuredContent, as JSON, whenever a result has it (Codex then drops every content
// block, pictures included), and Gemini CLI shows content text but fails a call whose first text block is
// JSON that is not an object. Under `text` the tools declare no outputSchema and results carry no
// structuredContent (the spec's rule: a tool that declares an outputSchema returns structuredContent), so
// these clients show the content we wrote for a model: short text, the pictures as images, failures flagged.
//
// Each row is there because a test with that real client showed its model needs it.
import * as v from "valibot";
import type { Era } from "../era.ts";

export const ResultStyleSetting = v.picklist(["auto", "structured", "text"]);
export type ResultStyleSetting = v.InferOutput<typeof ResultStyleSetting>;
export type ResultStyle = Exclude<ResultStyleSetting, "auto">;

/** How one client's results are shaped. */
export interface Style {
  shape: ResultStyle;
  /**
   * Whether a failed cell's pictures go out as image blocks. Gemini CLI shows a failed call to its model
   * as one string holding the whole raw result, so there a picture would be base64 text in its context.
   */
  picturesWhenFailed: boolean;
}

interface Row extends Style {
  /** The client's `clientInfo.name`, as it sends it. */
  client: string;
  /** The test that drives this client with a scripted model and reads what the model was shown. */
  test: string;
}

export const STYLE_TABLE: readonly Row[] = [
  { client: "claude-code", shape: "text", picturesWhenFailed: true, test: "tests/e2e/agent-claude.test.ts" },
  {
    client: "codex-mcp-client",
    shape: "text",
    picturesWhenFailed: true,
    test: "tests/e2e/agent-codex.test.ts",
  },
  { client: "copilot-cli", shape: "text", picturesWhenFailed: true, test: "tests/e2e/agent-copilot.test.ts" },
  {
    client: "gemini-cli-mcp-client",
    shape: "text",
    picturesWhenFailed: false,
    test: "tests/e2e/agent-gemini.test.ts",
  },
];

/**
 * The style for one client: the setting when it names one, else its row of the table, else structured.
 * Both eras are looked up the same way; under 2026-07-28 the name comes with each request.
 */
export function styleFor(setting: ResultStyleSetting, clientName: string | undefined, _era: Era): Style {
  const row = STYLE_TABLE.find((entry) => entry.client === clientName);
  if (setting !== "auto") return { shape: setting, picturesWhenFailed: row?.picturesWhenFailed ?? true };
  return row ?? { shape: "structured", picturesWhenFailed: true };
}
