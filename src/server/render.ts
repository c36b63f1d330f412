// Turns a tool's structured value into the MCP CallToolResult (README "Errors"): one text block for
// people, the structured value for programs, and isError derived from the value itself.
import type { ArtifactReference } from "../artifacts/reference.ts";
import { artifactUri } from "../artifacts/uri.ts";
import { TEXT_PREVIEW_MAX_BYTES, TOOL_RESULT_MAX_BYTES } from "../limits.ts";
import { log } from "../log.ts";
import { cutUtf8, utf8Bytes } from "../text/utf8.ts";
import { artifactResource } from "./resources.ts";

type Structured = Record<string, unknown>;
type TextBlock = { type: "text"; text: string };
type LinkBlock = { type: "resource_link" } & ReturnType<typeof artifactResource>;

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

/** The reference of an auto-artifact, if the value carries one. */
function artifactOf(value: Structured): ArtifactReference | undefined {
  const artifact = value.artifact as Record<string, unknown> | undefined;
  if (!artifact || typeof artifact.id !== "string" || typeof artifact.format !== "string") return undefined;
  return artifact as ArtifactReference;
}

/** Tells the agent, in the text it reads, where the whole value went and how to get at it. */
function artifactNote(value: Structured): string {
  if (typeof value.artifact_error === "string") {
    return `\n[The whole value could not be kept as an artifact: ${value.artifact_error}]`;
  }
  const artifact = artifactOf(value);
  if (!artifact) return "";
  const uri = artifactUri(String(value.session_id), artifact.id);
  return (
    `\n[Preview shortened; the whole value is artifact ${artifact.id} (${artifact.format}, ${artifact.size} bytes). ` +
    "Read it in ranges with artifact_read (id, offset, length <= 65536), write it to a file with artifact_save, " +
    `or open resource ${uri}.]`
  );
}

export function render(value: Structured) {
  const structured: Structured = { ...value };
  if (isErrorValue(structured) && typeof structured.error_code !== "string") {
    // Every failure path sets its own code; reaching this is a bug, but the agent still gets a code.
    log.error("an error result without error_code:", structured.error);
    structured.error_code = "INTERNAL";
  }
  let text = textOf(structured);
  // The artifact note is what makes a shortened preview usable, so the cut never reaches it.
  const note = artifactNote(structured);
  const room = TEXT_PREVIEW_MAX_BYTES - utf8Bytes(note);
  if (utf8Bytes(text) > room) {
    text = `${cutUtf8(text, room).text}\n${PREVIEW_TRUNCATED_NOTE}`;
    structured.text_truncated = true;
  }
  text += note;
  const artifact = artifactOf(structured);
  const link =
    artifact && typeof structured.session_id === "string"
      ? [{ type: "resource_link" as const, ...artifactResource(structured.session_id, artifact) }]
      : [];
  const result = {
    content: [{ type: "text", text }, ...link] as [TextBlock, ...LinkBlock[]],
    structuredContent: structured,
    isError: isErrorValue(structured),
  };
  if (utf8Bytes(JSON.stringify(result)) > TOOL_RESULT_MAX_BYTES) {
    result.content = [{ type: "text", text: PRESENTATION_OMITTED }, ...link];
  }
  return result;
}
