/**
 * The model calls of each session under way in this process. Ending a session waits on them, so
 * the trajectory it returns holds every call the harness made, including one cut short by the
 * harness's exit, whose record is written only once the guard has seen the connection close.
 */
export class CallsInFlight {
  private readonly count = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();

  /** Counts one call of the session as under way; the returned function (idempotent) ends it. */
  begin(sessionId: string): () => void {
    this.count.set(sessionId, (this.count.get(sessionId) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.count.get(sessionId) ?? 1) - 1;
      if (left > 0) return void this.count.set(sessionId, left);
      this.count.delete(sessionId);
      for (const wake of this.waiting.get(sessionId) ?? []) wake();
      this.waiting.delete(sessionId);
    };
  }

  /** Calls of the session under way now. */
  of(sessionId: string): number {
    return this.count.get(sessionId) ?? 0;
  }

  /** Resolves true once no call of the session is under way here, or false after `timeoutMs`. */
  idle(sessionId: string, timeoutMs: number): Promise<boolean> {
    if (this.of(sessionId) === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const list = this.waiting.get(sessionId) ?? [];
        const at = list.indexOf(wake);
        if (at >= 0) list.splice(at, 1);
        resolve(false);
      }, timeoutMs);
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.waiting.set(sessionId, [...(this.waiting.get(sessionId) ?? []), wake]);
    });
  }
}
