// Turns a tool's structured value into the MCP CallToolResult (contract §1.1): one text block for
// people, the structured value for programs, and isError derived from the value itself.
import { TEXT_PREVIEW_MAX_BYTES, TOOL_RESULT_MAX_BYTES } from "../limits.ts";
import { cutUtf8, utf8Bytes } from "../text/utf8.ts";

type Structured = Record<string, unknown>;

export const PREVIEW_TRUNCATED_NOTE =
  "[Text preview truncated; complete bounded output is in structuredContent.]";
export const PRESENTATION_OMITTED = "Output presentation omitted; inspect structuredContent.";

export function isErrorValue(value: Structured): boolean {
  return (
    value.isError === true || value.success === false || (value.error !== undefined && value.error !== null)
  );
}

function textOf(value: Structured): string {
  if (!("success" in value)) return JSON.stringify(value);
  let text = typeof value.stdout === "string" ? value.stdout : "";
  if (typeof value.stderr === "string" && value.stderr) text += `\nStderr:\n${value.stderr}`;
  if (typeof value.return_value === "string" && value.return_value) text += `\n${value.return_value}`;
  if (typeof value.error === "string") text += `\n${value.error}`;
  if (value.state === "cleared") text += "\nWorker state cleared.";
  return text || "Execution completed.";
}

export function render(value: Structured) {
  const structured: Structured = { ...value };
  let text = textOf(structured);
  if (utf8Bytes(text) > TEXT_PREVIEW_MAX_BYTES) {
    text = `${cutUtf8(text, TEXT_PREVIEW_MAX_BYTES).text}\n${PREVIEW_TRUNCATED_NOTE}`;
    structured.text_truncated = true;
  }
  const result = {
    content: [{ type: "text" as const, text }],
    structuredContent: structured,
    isError: isErrorValue(structured),
  };
  if (utf8Bytes(JSON.stringify(result)) > TOOL_RESULT_MAX_BYTES) {
    result.content = [{ type: "text", text: PRESENTATION_OMITTED }];
  }
  return result;
}
