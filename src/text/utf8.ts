// Byte-bounded text: limits are in UTF-8 bytes and a cut never splits a character.
const encoder = new TextEncoder();

/** The length of `text` in UTF-8 as the encoder writes it (a lone surrogate becomes 3 bytes of U+FFFD). */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/** Cuts `text` to at most `maxBytes` UTF-8 bytes at a character boundary. */
export function cutUtf8(text: string, maxBytes: number): { text: string; cut: boolean } {
  if (text.length <= maxBytes / 3 || utf8Bytes(text) <= maxBytes) return { text, cut: false };
  const bytes = encoder.encode(text);
  let end = maxBytes;
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a character start.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return { text: new TextDecoder().decode(bytes.subarray(0, end)), cut: true };
}

/** Keeps the last `maxBytes` UTF-8 bytes of `text` (its newest part), starting on a character boundary. */
export function tailUtf8(text: string, maxBytes: number): string {
  if (text.length <= maxBytes / 3 || utf8Bytes(text) <= maxBytes) return text;
  const bytes = encoder.encode(text);
  let start = bytes.length - maxBytes;
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start++;
  return new TextDecoder().decode(bytes.subarray(start));
}
