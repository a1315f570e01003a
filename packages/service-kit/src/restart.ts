/**
 * When a supervised process that died is started again: the one restart policy of the stack's
 * supervisor, the trainer's worker and the guard's worker processes. The next start waits
 * `delay`: it doubles (at least 1 s, at most `maxMs`) while the process keeps dying before it is
 * up, which a bad setting every restart would hit, and starts over from `initialMs` once it is up.
 * More than `maxPerMinute` deaths within a minute is a crash loop: the supervisor gives up.
 */
export class RestartPolicy {
  private delayMs: number;
  private readonly deaths: number[] = [];

  constructor(private readonly options: { initialMs: number; maxMs: number; maxPerMinute?: number }) {
    this.delayMs = options.initialMs;
  }

  /**
   * Records a death (`beforeUp`: before the process was up, or after) and says how long to wait
   * before the next start; null when the deaths come too fast to go on.
   */
  died(beforeUp: boolean, now = Date.now()): number | null {
    this.deaths.push(now);
    while (this.deaths.length > 0 && this.deaths[0]! <= now - 60_000) this.deaths.shift();
    const { maxPerMinute, maxMs } = this.options;
    if (maxPerMinute !== undefined && this.deaths.length > maxPerMinute) return null;
    const delay = this.delayMs;
    if (beforeUp) this.delayMs = Math.min(Math.max(delay * 2, 1_000), maxMs);
    return delay;
  }

  /** The process is up: the next death waits the first delay again. */
  up(): void {
    this.delayMs = this.options.initialMs;
  }

  /** Deaths within the last minute. */
  get recentDeaths(): number {
    return this.deaths.length;
  }
}
