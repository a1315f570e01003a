import type { LoadResult } from "./load.ts";

/** One measured row: a target at one concurrency, with the direct run it is compared to. */
export interface Row {
  scenario: string;
  level: number;
  name: string;
  result: LoadResult;
  direct: LoadResult;
  /** CPU milliseconds per answer: the load generator (this process), the upstream, the proxy. */
  cpu: { loadgen: number | undefined; upstream: number | undefined; proxy: number | undefined };
}

export const HEADER =
  "scenario     c  target     req/s  vs direct  p50 ms  p99 ms  added p99  errors counted | CPU ms/answer: loadgen upstream  proxy  proxy answers/s per core";

const num = (n: number | undefined, digits: number, width: number) =>
  (n === undefined || Number.isNaN(n) ? "-" : n.toFixed(digits)).padStart(width);

/** One table line; `proxy answers/s per core` is 1000 / the proxy's CPU ms per answer. */
export function formatRow(row: Row): string {
  const { result: r, direct } = row;
  const isDirect = row.name === "direct";
  return [
    row.scenario.padEnd(9),
    String(row.level).padStart(5),
    ` ${row.name.padEnd(8)}`,
    num(r.perSecond, 0, 7),
    `${num(r.perSecond / direct.perSecond, 2, 9)}x`,
    num(r.p50, 1, 7),
    num(r.p99, 1, 7),
    isDirect ? "-".padStart(10) : num(r.p99 - direct.p99, 1, 10),
    String(r.errors).padStart(7),
    String(r.requests).padStart(7),
    " |",
    num(row.cpu.loadgen, 3, 22),
    num(row.cpu.upstream, 3, 8),
    num(row.cpu.proxy, 3, 6),
    num(row.cpu.proxy === undefined ? undefined : 1000 / row.cpu.proxy, 0, 26),
  ].join(" ");
}

/**
 * Whether each benchmark target is met at the highest concurrency of a table, worked out from its
 * rows, for every guard measured (one process, and each worker count).
 */
export function verdicts(title: string, rows: Row[]): string[] {
  const top = Math.max(...rows.map((r) => r.level));
  const atTop = rows.filter((r) => r.level === top);
  const litellm = atTop.find((r) => r.name === "litellm");
  const pipe = atTop.find((r) => r.name === "pipe");
  const mark = (ok: boolean) => (ok ? "met    " : "NOT met");
  const lines: string[] = [];
  for (const guard of atTop.filter((r) => r.name.startsWith("guard"))) {
    const ratio = guard.result.perSecond / guard.direct.perSecond;
    const added = guard.result.p99 - guard.direct.p99;
    const who = guard.name;
    lines.push(
      `${title}, ${top} streams, ${who}:`,
      `  ${mark(ratio >= 0.9)} ${who} >= 0.90x direct throughput (${ratio.toFixed(2)}x)`,
      `  ${mark(added < 5)} ${who} adds < 5 ms p99 (${added.toFixed(1)} ms)`,
    );
    const own = guard.cpu.proxy;
    const floor = pipe?.cpu.proxy;
    if (own !== undefined && floor !== undefined && floor > 0) {
      lines.push(
        `  ${mark(own <= 1.5 * floor)} ${who} CPU per answer <= 1.5x the byte pipe's (${own.toFixed(3)} vs ${floor.toFixed(3)} ms, ${(own / floor).toFixed(2)}x)`,
      );
    }
    if (litellm) {
      // A LiteLLM run that completed nothing in the window has no p99: any guard p99 is ahead of it.
      const litellmP99 = Number.isNaN(litellm.result.p99) ? Number.POSITIVE_INFINITY : litellm.result.p99;
      const ahead = guard.result.perSecond > litellm.result.perSecond && guard.result.p99 < litellmP99;
      lines.push(
        `  ${mark(ahead)} ${who} ahead of LiteLLM (${guard.result.perSecond.toFixed(0)} vs ${litellm.result.perSecond.toFixed(0)} req/s, p99 ${guard.result.p99.toFixed(1)} vs ${litellm.result.p99.toFixed(1)} ms)`,
      );
    } else lines.push("  (LiteLLM not measured)");
  }
  return lines;
}
