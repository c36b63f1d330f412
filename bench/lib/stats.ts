// Order statistics over timing samples. Percentiles interpolate linearly between the two nearest ranks.

export interface Summary {
  n: number;
  median: number;
  p90: number;
  min: number;
}

export function percentile(samples: readonly number[], fraction: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const position = (sorted.length - 1) * fraction;
  const below = Math.floor(position);
  const above = Math.ceil(position);
  const low = sorted[below] as number;
  const high = sorted[above] as number;
  return low + (high - low) * (position - below);
}

export function median(samples: readonly number[]): number {
  return percentile(samples, 0.5);
}

export function summarize(samples: readonly number[]): Summary {
  return {
    n: samples.length,
    median: median(samples),
    p90: percentile(samples, 0.9),
    min: samples.length === 0 ? Number.NaN : Math.min(...samples),
  };
}

/** Fixed decimals chosen by magnitude, so sub-millisecond and second-scale figures both read well. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return "n/a";
  if (ms < 10) return `${ms.toFixed(3)} ms`;
  if (ms < 100) return `${ms.toFixed(1)} ms`;
  return `${ms.toFixed(0)} ms`;
}

export function formatRatio(ratio: number): string {
  return Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : "n/a";
}

export function formatMiB(kib: number | undefined): string {
  return kib === undefined || !Number.isFinite(kib) ? "n/a" : `${(kib / 1024).toFixed(1)} MiB`;
}
