// Both kinds of HTTP client (a legacy MCP session, a 2026-07-28 principal) end after a while without
// requests, unless a run of theirs is in progress: the client may poll it after a long pause. A client
// that was busy counts as seen, so its idle time starts when its last run ends, not at its last request
// (a cell longer than the idle timeout must not cost its client the answer's session).
import { HTTP_IDLE_SWEEP_MAX_MS } from "../../limits.ts";

/**
 * Ends (`end`) every item without a request (`lastSeen`, performance.now()) for `idleMs` whose sessions
 * have no run in progress (`busy`), checked on a timer; returns the function that stops the timer.
 */
export function sweepIdle<T extends { lastSeen: number }>(
  idleMs: number,
  items: () => Iterable<T>,
  busy: (item: T) => boolean,
  end: (item: T) => void,
): () => void {
  const timer = setInterval(
    () => {
      const now = performance.now();
      for (const item of items()) {
        if (busy(item)) item.lastSeen = now;
        else if (now - item.lastSeen > idleMs) end(item);
      }
    },
    Math.min(idleMs / 4, HTTP_IDLE_SWEEP_MAX_MS),
  );
  timer.unref();
  return () => clearInterval(timer);
}
