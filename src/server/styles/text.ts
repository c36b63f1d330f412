// The `text` result style (styles/table.ts): a tool's structured value written for a model to read. No
// structuredContent: the text says what matters once, in the order a person would say it, the pictures
// follow as image blocks, and a failure has the client's error flag set and its code in the text.

import type { BrokerHealth } from "../../broker/broker.ts";
import { TEXT_STYLE_MAX_BYTES, TOOL_RESULT_MAX_BYTES } from "../../limits.ts";
import type { SessionMetadata } from "../../sessions/metadata.ts";
import { sizeText } from "../../text/size.ts";
import { cutUtf8, utf8Bytes } from "../../text/utf8.ts";
import type { DisplayRecord } from "../../worker/displays.ts";
import type { Era } from "../era.ts";
import { artifactNote, isErrorValue, notInlineNote, PICTURES_OMITTED } from "../render.ts";
import type { Style } from "./table.ts";

type Structured = Record<string, unknown>;
type Block = { type: "text"; text: string } | { type: "image"; data: string; mimeType: string };

/**
 * A text that is JSON but not an object (a cell that printed `42`) gets a label first: Gemini CLI parses
 * a first text block as JSON when a result has no structuredContent, and fails the call on a non-object.
 */
function notJson(text: string): string {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? text
      : `Output:\n${text}`;
  } catch {
    return text;
  }
}

/** The sentence that stands for a failed run's pictures where the style holds them back. */
function heldPictures(displays: DisplayRecord[]): string {
  const count = displays.filter((display) => display.inline && display.data !== undefined).length;
  if (!count) return "";
  const what = count === 1 ? "1 picture was" : `${count} pictures were`;
  return `\n[${what} not sent with this failure; display() it in a cell that succeeds to see it.]`;
}

/** What the text says when a cell printed nothing and had no value. */
export const NOTHING_TO_SHOW = "Done: no output and no value.";

export function renderText(tool: string, value: Structured, era: Era, style: Style) {
  const displays = (value.displays as DisplayRecord[] | undefined) ?? [];
  const isError = isErrorValue(value);
  const held = isError && !style.picturesWhenFailed ? heldPictures(displays) : "";
  const text = notJson(
    fit(textFor(tool, value, era), artifactNote(value) + notInlineNote(value, displays) + held),
  );
  const pictures = displayBlocks(displays).filter((block) => !held || block.type !== "image");
  const result = { content: [{ type: "text", text }, ...pictures] as Block[], isError };
  if (bytesOf(result) > TOOL_RESULT_MAX_BYTES)
    result.content = [{ type: "text", text: `${text}\n${PICTURES_OMITTED}` }];
  return result;
}

function textFor(tool: string, value: Structured, era: Era): string {
  if ("success" in value) {
    const body = executionText(value);
    return tool === "python_run" ? `${runHeader(value)}\n${body}` : body;
  }
  if (typeof value.error === "string") return failureText(value);
  switch (tool) {
    case "python_health":
      return healthText(value, era);
    case "python_start":
      return (
        `Started run ${value.run_id}. Poll python_run with this run_id for its output so far and its ` +
        "result; python_cancel stops it."
      );
    case "python_run":
      return liveRunText(value);
    case "python_cancel":
      return (
        `Cancellation requested for run ${value.run_id}; poll python_run until it reports the result. ` +
        "Whatever the cell already did outside Python stays done."
      );
    default:
      return fieldsText(value);
  }
}

const str = (value: unknown) => (typeof value === "string" ? value : "");
const seconds = (ms: unknown) => `${(Number(ms) / 1000).toFixed(1)} s`;

/** A finished run: its output, its value or its failure, and what happened to the variables. */
function executionText(value: Structured): string {
  const truncated = (value.truncated ?? {}) as Record<string, boolean>;
  const parts: string[] = [];
  const stdout = str(value.stdout).replace(/\n$/, "");
  if (stdout) parts.push(stdout + (truncated.stdout ? "\n[stdout was cut at its 50,000-byte bound]" : ""));
  const stderr = str(value.stderr).replace(/\n$/, "");
  if (stderr) {
    parts.push(`Stderr:\n${stderr}${truncated.stderr ? "\n[stderr was cut at its 50,000-byte bound]" : ""}`);
  }
  if (value.success === true) {
    const preview = str(value.return_value);
    // "Out:" keeps a value apart from what the cell printed (and never reads as bare JSON).
    if (preview) parts.push(preview.includes("\n") ? `Out:\n${preview}` : `Out: ${preview}`);
    if (typeof value.exit_code === "number" && value.exit_code !== 0)
      parts.push(`Exit code ${value.exit_code}.`);
  } else {
    parts.push(failureText(value));
  }
  if (value.state === "cleared") parts.push("The worker's state was cleared: variables are gone.");
  else if (value.state_reset === true && Number(value.generation) > 1)
    parts.push("[This ran in a new worker: variables from before it are gone.]");
  if (typeof value.background_tasks_cancelled === "number" && value.background_tasks_cancelled > 0)
    parts.push(`[${value.background_tasks_cancelled} background asyncio tasks were cancelled.]`);
  if (parts.length) return parts.join("\n");
  const pictures = ((value.displays as DisplayRecord[] | undefined) ?? []).filter(
    (display) => display.inline,
  );
  return pictures.length
    ? `Done; ${pictures.length === 1 ? "the display follows" : `${pictures.length} displays follow`}.`
    : NOTHING_TO_SHOW;
}

/**
 * `Error (CODE): message`. A traceback's last line (the exception) goes into that first line, the frames
 * follow it, so the essentials come first however long the traceback is.
 */
function failureText(value: Structured): string {
  const code = str(value.error_code) || "INTERNAL";
  const error = (str(value.error) || "Execution failed").replace(/\n+$/, "");
  const lines = error.split("\n");
  if (lines.length === 1) return `Error (${code}): ${error}`;
  const last = lines.pop() as string;
  const frames = lines.filter((line) => line !== "Traceback (most recent call last):").join("\n");
  return `Error (${code}): ${last}\nTraceback (most recent call last):\n${frames}`;
}

function runHeader(value: Structured): string {
  const how = value.success === true ? "finished" : "failed";
  return `Run ${value.run_id} ${how} after ${seconds(value.elapsed_ms)}:`;
}

function liveRunText(value: Structured): string {
  const lines = [`Run ${value.run_id} is ${value.status} (${seconds(value.elapsed_ms)} so far).`];
  const stdout = str(value.stdout).replace(/\n$/, "");
  const stderr = [str(value.stderr), str(value.native_stderr)].filter(Boolean).join("").replace(/\n$/, "");
  lines.push(stdout ? `Output so far:\n${stdout}` : "No output yet.");
  if (stderr) lines.push(`Stderr so far:\n${stderr}`);
  lines.push("Poll python_run again for more, or stop it with python_cancel.");
  return lines.join("\n");
}

type Health = { server: SessionMetadata; broker: BrokerHealth; sessions: { sessions: SessionMetadata[] } };

function hostsText(sandbox: { allowed_hosts: string[]; asks_unknown_hosts: boolean }): string {
  const allowed = sandbox.allowed_hosts.length ? sandbox.allowed_hosts.join(", ") : "no host allowed";
  return `${allowed}; ${sandbox.asks_unknown_hosts ? "other hosts are put to the person" : "other hosts refused"}`;
}

/** The few facts a model acts on: where it is, the session to name (when the era needs it), Python, the broker. */
function healthText(value: Structured, era: Era): string {
  const { server, broker, sessions } = value as unknown as Health;
  const version = server.python?.python_version ?? server.environment.version;
  const running = server.python?.running ? `running, pid ${server.python.pid}` : "starts with the first cell";
  const session =
    era === "modern"
      ? `Default session_id ${server.session_id} (pass it to execute_python and python_start)`
      : "Default session";
  const lines = [
    server.sandbox.contained
      ? `repl-mcp ${server.version}: Python contained in an OS sandbox (policy ${server.sandbox.policy}; ` +
        `writes only ${server.sandbox.writable.join(", ")}; network: ${hostsText(server.sandbox)}).`
      : `repl-mcp ${server.version}: trusted local Python with full access to this machine (not a sandbox).`,
    `${session}: project ${server.project}, generation ${server.generation}, ` +
      (server.active_run ? `running run ${server.active_run}.` : "idle."),
    `Python ${server.python_executable}${version ? ` ${version}` : ""} (${running}).`,
    brokerLine(broker),
  ];
  const others = sessions.sessions.filter((entry) => entry.session_id !== server.session_id && !entry.closed);
  if (others.length) {
    const shown = others.slice(0, 4).map((entry) => `${entry.session_id} (${entry.project})`);
    const more = others.length > shown.length ? ` and ${others.length - shown.length} more` : "";
    lines.push(`Other sessions: ${shown.join(", ")}${more}.`);
  }
  return lines.join("\n");
}

function brokerLine(broker: BrokerHealth): string {
  if (broker.configuration_error) return `MCP broker: configuration error: ${broker.configuration_error}`;
  if (broker.enabled === false) return "MCP broker: disabled.";
  const servers = broker.configured_servers;
  if (!servers) return "MCP broker: no servers configured (mcp.* in cells has nothing to call).";
  return (
    `MCP broker: ${servers} server${servers === 1 ? "" : "s"} configured, ${broker.connected_transports} ` +
    "connected (list them in a cell with mcp.servers())."
  );
}

/** Any other tool: its fields one per line, without the identity a model has no use for. */
function fieldsText(value: Structured): string {
  const lines: string[] = [];
  for (const [key, field] of Object.entries(value)) {
    if (key === "server_id" || key === "generation" || field === null || field === undefined) continue;
    lines.push(`${key}: ${typeof field === "string" ? field : JSON.stringify(field)}`);
  }
  return lines.join("\n") || "Done.";
}

/** Cuts the text to the style's bound; the note (where the whole value went) is never cut. */
function fit(text: string, note: string): string {
  const room = TEXT_STYLE_MAX_BYTES - utf8Bytes(note);
  const bytes = utf8Bytes(text);
  if (bytes <= room) return text + note;
  const cut = cutUtf8(text, room - 200).text;
  return (
    `${cut}\n[Text cut at ${sizeText(room - 200)} of ${sizeText(bytes)}; print a smaller part (a slice, ` +
    `a head) to see the rest.]${note}`
  );
}

/** The pictures and text displays a run showed inline, in order; artifacts are named in the text. */
function displayBlocks(displays: DisplayRecord[]): Block[] {
  const blocks: Block[] = [];
  for (const display of displays) {
    if (!display.inline) continue;
    if (display.data !== undefined)
      blocks.push({ type: "image", data: display.data, mimeType: display.mime });
    else if (display.text !== undefined) blocks.push({ type: "text", text: display.text });
  }
  return blocks;
}

function bytesOf(result: { content: Block[] }): number {
  let total = 0;
  for (const block of result.content)
    total += block.type === "image" ? block.data.length + 64 : utf8Bytes(block.text) + 32;
  return total;
}
