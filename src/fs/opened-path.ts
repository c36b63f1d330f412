// Where an open file really is: the name its descriptor resolves to now, as Linux's /proc says. A path
// checked before it was opened may have become a link to somewhere else in between; this one cannot.
import { readlinkSync } from "node:fs";

/** The real path of the file behind `fd`; undefined where there is no /proc (macOS). */
export function openedPath(fd: number): string | undefined {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return undefined;
  }
}
