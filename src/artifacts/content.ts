// Checks and encodings of artifact bytes: UTF-8 for text and JSON, bounded JSON, and the three range
// encodings of artifact_read.
import { type ErrorCodeName, ReplError } from "../errors.ts";
import { ARTIFACT_JSON_MAX_DEPTH } from "../limits.ts";
import { type ArtifactFormat, ArtifactMessages } from "./reference.ts";

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The text, or undefined if the bytes are not complete UTF-8. */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Nesting depth of JSON text, counted outside strings; cheap and never recursive. */
function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

/** The parsed value of bounded JSON text, or undefined when it is invalid or nested too deeply. */
export function parseBoundedJson(text: string): { value: unknown } | undefined {
  if (jsonDepth(text) > ARTIFACT_JSON_MAX_DEPTH) return undefined;
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

export type RangeEncoding = "text" | "base64" | "hex";

/** The range in the requested encoding, or undefined when text was asked of incomplete UTF-8. */
export function encodeRange(bytes: Uint8Array, encoding: RangeEncoding): string | undefined {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (encoding === "base64") return buffer.toString("base64");
  if (encoding === "hex") return buffer.toString("hex");
  return decodeUtf8(bytes);
}

export function sha256Hex(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

export const fail = (message: string, code: ErrorCodeName) => new ReplError(code, message);

/** Refuses bytes that cannot be what their format says. */
export function checkContent(bytes: Uint8Array, format: ArtifactFormat): void {
  if (format === "binary") return;
  const text = decodeUtf8(bytes);
  if (text === undefined) throw fail(ArtifactMessages.notUtf8, "ARTIFACT_NOT_UTF8");
  if (format === "json" && !parseBoundedJson(text)) throw fail(ArtifactMessages.badJson, "ARTIFACT_BAD_JSON");
}
