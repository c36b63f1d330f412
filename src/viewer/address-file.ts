// Where a running viewer can be found: one private file per serving process in the runtime directory
// (0600 in a 0700 directory, since the URL carries the token), written once the viewer listens and
// removed at exit. `repl-mcp viewer` lists them; a file left by a process that died is skipped (and
// removed when it is ours).
import { readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { writePrivateFileAtomic } from "../fs/atomic.ts";
import { ensurePrivateDirectory } from "../fs/private-dir.ts";
import { readPrivateFile } from "../fs/private-file.ts";
import { runtimeDirectory } from "../fs/user-dirs.ts";
import { VIEWER_FILE_MAX_BYTES } from "../limits.ts";

const PREFIX = "viewer-";
const SUFFIX = ".json";

export const ViewerAddress = v.object({
  pid: v.pipe(v.number(), v.integer(), v.minValue(1)),
  project: v.string(),
  /** Milliseconds since the epoch. */
  started_at: v.number(),
  url: v.pipe(v.string(), v.startsWith("http://127.0.0.1:")),
});
export type ViewerAddress = v.InferOutput<typeof ViewerAddress>;

/** Writes this process's file; returns the function that removes it. */
export function publishAddress(address: ViewerAddress): () => void {
  const dir = runtimeDirectory();
  ensurePrivateDirectory(dir, `the runtime directory ${dir}`);
  const path = join(dir, `${PREFIX}${address.pid}${SUFFIX}`);
  writePrivateFileAtomic(path, `${JSON.stringify(address)}\n`);
  return () => {
    try {
      unlinkSync(path);
    } catch {
      // Already gone.
    }
  };
}

/** Every live viewer of this user, oldest first. */
export function listAddresses(): ViewerAddress[] {
  const dir = runtimeDirectory();
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const found: ViewerAddress[] = [];
  for (const name of names) {
    if (!name.startsWith(PREFIX) || !name.endsWith(SUFFIX)) continue;
    const path = join(dir, name);
    const address = readAddress(path);
    if (!address) continue;
    if (alive(address.pid)) found.push(address);
    else removeStale(path);
  }
  return found.sort((a, b) => a.started_at - b.started_at);
}

function readAddress(path: string): ViewerAddress | undefined {
  try {
    const text = readPrivateFile(path, path, VIEWER_FILE_MAX_BYTES);
    if (text === null) return undefined;
    const parsed = v.safeParse(ViewerAddress, JSON.parse(text));
    return parsed.success ? parsed.output : undefined;
  } catch {
    // Someone else's file, a link, or half-written garbage: never trusted, never listed.
    return undefined;
  }
}

/** Signal 0 checks existence only; EPERM means a process of another user reuses that pid. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function removeStale(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Another lister removed it first.
  }
}
