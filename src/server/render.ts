// Turns a tool's structured value into the MCP CallToolResult (docs/tools.md "Errors"): one text block for
// people, then the run's inline displays in order (images as image blocks, text as text blocks) and links
// to artifacts, the structured value for programs, and isError derived from the value itself.
import type { ArtifactReference } from "../artifacts/reference.ts";
import { artifactUri } from "../artifacts/uri.ts";
import {
  HISTORY_ARCHIVED_PICTURES_MAX,
  HISTORY_INLINE_IMAGES_MAX_BYTES,
  TEXT_PREVIEW_MAX_BYTES,
  TOOL_RESULT_MAX_BYTES,
} from "../limits.ts";
import { log } from "../log.ts";
import { sizeText } from "../text/size.ts";
import { cutUtf8, utf8Bytes } from "../text/utf8.ts";
import type { DisplayRecord } from "../worker/displays.ts";
import { artifactResource } from "./resources.ts";

type Structured = Record<string, unknown>;
type TextBlock = { type: "text"; text: string };
type ImageBlock = { type: "image"; data: string; mimeType: string };
type LinkBlock = { type: "resource_link" } & ReturnType<typeof artifactResource>;
/** The text block always comes first; clients and tests read it as content[0]. */
type Content = [TextBlock, ...Array<TextBlock | ImageBlock | LinkBlock>];

export const PREVIEW_TRUNCATED_NOTE =
  "[Text preview truncated; complete bounded output is in structuredContent.]";
export const PRESENTATION_OMITTED = "Output presentation omitted; inspect structuredContent.";
export const PICTURES_OMITTED = "[Inline pictures omitted: with them the result would exceed 1 MB.]";

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
export function artifactNote(value: Structured): string {
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

/**
 * One sentence per kind of display that is not inline (set aside by the inline limits, or archived
 * because the run is no longer among the newest), so an agent knows they exist and where they went.
 */
export function notInlineNote(value: Structured, displays: DisplayRecord[]): string {
  const aside = displays.filter((display) => !display.inline && !display.archived);
  const archived = displays.filter((display) => display.archived);
  const limits = "inline limits: 8 displays, 512 KiB per image, 768 KiB of images per result";
  const age =
    `only a session's newest runs keep their pictures inline, ${sizeText(HISTORY_INLINE_IMAGES_MAX_BYTES)} ` +
    `in all, and its latest ${HISTORY_ARCHIVED_PICTURES_MAX} archived ones as artifacts`;
  return (
    (aside.length
      ? `\n[${count(aside, "display")} not shown inline (${limits}).${where(value, aside)}]`
      : "") +
    (archived.length
      ? `\n[${count(archived, "picture")} no longer shown inline (${age}).${where(value, archived)}]`
      : "")
  );
}

function count(displays: DisplayRecord[], noun: string): string {
  return `${displays.length} ${noun}${displays.length === 1 ? "" : "s"}`;
}

function where(value: Structured, displays: DisplayRecord[]): string {
  const stored = displays.filter((display) => display.artifact);
  if (!stored.length) return " They could not be kept; see structuredContent.displays.";
  const listed = stored
    .map(
      (display) =>
        `${display.artifact?.id} (${display.mime}, ${artifactUri(String(value.session_id), display.artifact?.id as string)})`,
    )
    .join(", ");
  const all = stored.length === displays.length ? "All" : `${stored.length}`;
  return ` ${all} saved as artifacts: ${listed}; fetch them with artifact_save or as resources.`;
}

/** The content blocks of a run's displays: inline ones, then links to the ones kept as artifacts. */
function displayBlocks(
  value: Structured,
  displays: DisplayRecord[],
): Array<TextBlock | ImageBlock | LinkBlock> {
  const blocks: Array<TextBlock | ImageBlock | LinkBlock> = [];
  for (const display of displays) {
    if (!display.inline) continue;
    if (display.data !== undefined)
      blocks.push({ type: "image", data: display.data, mimeType: display.mime });
    else if (display.text !== undefined) blocks.push({ type: "text", text: display.text });
  }
  for (const display of displays) {
    if (!display.artifact || typeof value.session_id !== "string") continue;
    const resource = artifactResource(value.session_id, display.artifact);
    blocks.push({ type: "resource_link", ...resource, mimeType: display.mime });
  }
  return blocks;
}

/**
 * The size of the result once serialized, without serializing the pictures: base64 is ASCII that JSON
 * leaves as it is, so each counts its length. A result with pictures would otherwise be copied whole
 * once more just to be measured.
 */
function serializedBytes(result: { content: Content }): number {
  let pictures = 0;
  const content = result.content.map((block) => {
    if (block.type !== "image") return block;
    pictures += block.data.length;
    return { ...block, data: "" };
  });
  return utf8Bytes(JSON.stringify({ ...result, content })) + pictures;
}

export function render(value: Structured) {
  const displays = (value.displays as DisplayRecord[] | undefined) ?? [];
  const structured: Structured = { ...value };
  if (isErrorValue(structured) && typeof structured.error_code !== "string") {
    // Every failure path sets its own code; reaching this is a bug, but the agent still gets a code.
    log.error("an error result without error_code:", structured.error);
    structured.error_code = "INTERNAL";
  }
  // Image data travels in content blocks only, never twice.
  if (displays.length) structured.displays = displays.map(({ data: _data, ...display }) => display);
  let text = textOf(structured);
  // The artifact notes are what make a shortened preview usable, so the cut never reaches them.
  const note = artifactNote(structured) + notInlineNote(structured, displays);
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
  const shown = displayBlocks(structured, displays);
  const result: { content: Content; structuredContent: Structured; isError: boolean } = {
    content: [{ type: "text", text }, ...shown, ...link],
    structuredContent: structured,
    isError: isErrorValue(structured),
  };
  if (serializedBytes(result) > TOOL_RESULT_MAX_BYTES) {
    // Pictures go first: the text and the structured value matter more to an agent.
    const links = shown.filter((block) => block.type === "resource_link");
    result.content = [{ type: "text", text: `${text}\n${PICTURES_OMITTED}` }, ...links, ...link];
    if (serializedBytes(result) > TOOL_RESULT_MAX_BYTES) {
      result.content = [{ type: "text", text: PRESENTATION_OMITTED }, ...link];
    }
  }
  return result;
}
