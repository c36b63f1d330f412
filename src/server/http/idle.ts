// Both kinds of HTTP client (a legacy MCP session, a 2026-07-28 principal) end after a while without
// requests, unless a run of theirs is in progress: the client may poll it after a long pause.

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
      for (const item of items()) if (now - item.lastSeen > idleMs && !busy(item)) end(item);
    },
    Math.min(idleMs / 2, 5_000),
  );
  timer.unref();
  return () => clearInterval(timer);
}
