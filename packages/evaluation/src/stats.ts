/**
 * Small, dependency-free statistics for paired evaluations. Deterministic, no Node built-ins, so
 * workflow code can compute reports during replay.
 */

const Z975 = 1.959963984540054;

// Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131,
  2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/** The 0.975 quantile of Student's t with `df` degrees of freedom. */
export function tQuantile975(df: number): number {
  if (!Number.isFinite(df) || df < 1) return Number.NaN;
  const whole = Math.floor(df);
  if (whole <= 30) return T975[whole - 1]!;
  // Cornish-Fisher expansion around the normal quantile: accurate to 1e-4 past 30 df.
  const z = Z975;
  return z + (z ** 3 + z) / (4 * whole) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * whole ** 2);
}

export const mean = (xs: readonly number[]): number =>
  xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;

/** Sample standard deviation (n - 1). */
export function sd(xs: readonly number[]): number {
  if (xs.length < 2) return Number.NaN;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((acc, x) => acc + (x - m) ** 2, 0) / (xs.length - 1));
}

export interface Interval {
  estimate: number;
  low: number;
  high: number;
}

/**
 * Mean with a 95% t-interval; the interval is degenerate (NaN bounds) below two observations.
 * `range` is where the quantity can lie at all (a difference of two rates: [-1, 1]): with few
 * observations the t-interval reaches past it (two tasks: t = 12.7), and is cut back to it.
 */
export function meanInterval(xs: readonly number[], range?: readonly [number, number]): Interval {
  const estimate = mean(xs);
  if (xs.length < 2) return { estimate, low: Number.NaN, high: Number.NaN };
  const half = (tQuantile975(xs.length - 1) * sd(xs)) / Math.sqrt(xs.length);
  const [min, max] = range ?? [Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY];
  return { estimate, low: Math.max(min, estimate - half), high: Math.min(max, estimate + half) };
}

/** Wilson score interval (95%) for a proportion: well-behaved at 0 and 1 and for small n. */
export function wilson(successes: number, n: number): Interval {
  if (n === 0) return { estimate: Number.NaN, low: Number.NaN, high: Number.NaN };
  const p = successes / n;
  const z2 = Z975 ** 2;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (Z975 * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / (1 + z2 / n);
  return { estimate: p, low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
}
