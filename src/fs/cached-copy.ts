// Files the server writes out of its own bundle for other programs to open (the worker's source, the
// sandbox's helper programs): one private, content-addressed copy each in the cache directory. Whoever
// can write into that directory runs code as the user at the next start, so it must be ours, 0700 and not
// a link (else this server uses a private temporary one), and a copy is used only while its bytes still
// have the digest in its name.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { log } from "../log.ts";
import { PRIVATE_FILE_MODE, type PRIVATE_PROGRAM_MODE, writePrivateFileAtomic } from "./atomic.ts";
import { ensurePrivateDirectory } from "./private-dir.ts";
import { PrivateFileError } from "./private-file.ts";
import { cacheDirectory } from "./user-dirs.ts";

let trusted: string | undefined;

/** The cache directory when it can be trusted; else a private one for this server, removed at exit. */
export function trustedCacheDirectory(): string {
  if (trusted) return trusted;
  const dir = cacheDirectory();
  try {
    ensurePrivateDirectory(dir, `The cache directory ${dir}`);
    trusted = dir;
  } catch (error) {
    if (!(error instanceof PrivateFileError)) throw error;
    const fallback = mkdtempSync(join(tmpdir(), "repl-mcp-cache-"));
    process.on("exit", () => rmSync(fallback, { recursive: true, force: true }));
    log.warn(
      `${error.message}; this server uses ${fallback} instead (fix or remove it to share the cache again)`,
    );
    trusted = fallback;
  }
  return trusted;
}

const hex = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");

/**
 * The path of an intact private copy of `bytes` named `<stem>-<digest><suffix>`, written now if missing
 * or altered. Returns the SHA-256 too.
 */
export function cachedCopy(
  stem: string,
  suffix: string,
  bytes: Uint8Array,
  mode: typeof PRIVATE_FILE_MODE | typeof PRIVATE_PROGRAM_MODE = PRIVATE_FILE_MODE,
): string {
  const digest = hex(bytes);
  const path = join(trustedCacheDirectory(), `${stem}-${digest.slice(0, 24)}${suffix}`);
  let intact = false;
  try {
    intact = hex(readFileSync(path)) === digest;
  } catch {}
  if (!intact) writePrivateFileAtomic(path, bytes, mode);
  return path;
}
