// The one way to bound a wait: race the work against a timer that is cleared whichever side wins, so no
// timer outlives its wait (a forgotten one keeps the event loop busy and fires into settled state).

/**
 * Settles like `work`, unless `ms` pass first: then settles with what `onTimeout` returns (or rejects
 * with what it throws). `work` is not cancelled; a late rejection of it is ignored.
 */
export function withTimeout<T, U = never>(work: Promise<T>, ms: number, onTimeout: () => U): Promise<T | U> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<U>((resolve, reject) => {
    timer = setTimeout(
      () => {
        try {
          resolve(onTimeout());
        } catch (error) {
          reject(error);
        }
      },
      Math.max(0, ms),
    );
  });
  work.catch(() => {});
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/** Waits for `work` for at most `ms`; never rejects. For "give it a moment, then go on" waits. */
export async function waitAtMost(work: Promise<unknown>, ms: number): Promise<void> {
  await withTimeout(
    work.then(
      () => {},
      () => {},
    ),
    ms,
    () => {},
  );
}
