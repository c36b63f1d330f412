// Memory given back to the system. JavaScriptCore collects when allocation asks for it, so a server that
// answers quickly and then waits, as this one does between an agent's turns, keeps garbage (and the pages
// under it) for a long time. Two moments are known to be worth a full collection:
// - a client has been quiet for IDLE_COLLECT_AFTER_MS: it is between turns, and nobody waits for the few
//   milliseconds a collection takes (server PSS after 100 cells 34.6 → 33.1 MiB, measured 300 ms later);
// - pictures worth PICTURES_RELEASED_BEFORE_COLLECTION_BYTES have been archived out of run histories:
//   their base64 strings are the largest things the server holds, hundreds of KiB each (soak of 1,000
//   plot cells after 10,000 plain ones: server RSS 1.35× the plain cells' without this, 1.47× when only
//   an asynchronous collection was asked for, 1.04 to 1.09× with this one).
import { IDLE_COLLECT_AFTER_MS, PICTURES_RELEASED_BEFORE_COLLECTION_BYTES } from "./limits.ts";

/** A full collection, once whatever is running now has finished, so no answer waits for it. */
function collectSoon(): void {
  setImmediate(() => Bun.gc(true));
}

let released = 0;

/** `bytes` of picture data just became garbage. */
export function picturesReleased(bytes: number): void {
  released += bytes;
  if (released < PICTURES_RELEASED_BEFORE_COLLECTION_BYTES) return;
  released = 0;
  collectSoon();
}

/**
 * Returns the function to call on every message a client sends; once the client has been quiet for
 * IDLE_COLLECT_AFTER_MS after some activity, the heap is collected once.
 */
export function collectWhenIdle(): () => void {
  let last = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    const quiet = performance.now() - last;
    if (quiet < IDLE_COLLECT_AFTER_MS) {
      timer = setTimeout(check, IDLE_COLLECT_AFTER_MS - quiet);
      timer.unref();
      return;
    }
    timer = undefined;
    Bun.gc(true);
  };
  return () => {
    last = performance.now();
    if (timer !== undefined) return;
    timer = setTimeout(check, IDLE_COLLECT_AFTER_MS);
    timer.unref();
  };
}
