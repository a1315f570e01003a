import { Agent, request } from "node:http";
import { cpuSeconds } from "./cpu.ts";

/** Figures for one target at one concurrency. */
export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** CPU seconds each watched process used between two samples around the measured window, in
   * `watch` order, the load generator's own (`self`), and the answers completed in between. */
  cpu: { seconds: number[]; self: number; answers: number };
}

export interface LoadTarget {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** One streamed request, read to its end; resolves with the elapsed milliseconds. */
function once(target: LoadTarget, agent: Agent): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      target.url,
      {
        method: "POST",
        agent,
        headers: {
          ...target.headers,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(target.body),
        },
      },
      (res) => {
        let tail = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          tail = (tail + c).slice(-64);
        });
        res.on("end", () => {
          if (res.statusCode !== 200 || !tail.includes("[DONE]"))
            reject(new Error(`status ${res.statusCode}: ${tail}`));
          else resolve(performance.now() - started);
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    // A request still running after 30 s counts as an error: the run stays bounded in time.
    req.setTimeout(30_000, () => req.destroy(new Error("no answer within 30 s")));
    req.end(target.body);
  });
}

/**
 * Runs `concurrency` loops of streamed requests for `seconds` after `warmup` seconds. Throughput
 * counts the requests that complete inside the measured window, whenever they started (a slow
 * target still shows its throughput); latency is that of the requests started inside the window,
 * however late they end, so the warm-up's cold start is not in the percentiles. Bounded in time: no
 * request starts after the window, none runs past 30 s.
 * The CPU time of the `watch` processes is sampled at the window's start and end.
 */
export async function runLoad(
  target: LoadTarget,
  concurrency: number,
  seconds: number,
  warmup: number,
  watch: number[] = [],
): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let completed = 0;
  let errors = 0;
  const start = performance.now();
  const measureFrom = start + warmup * 1000;
  const end = measureFrom + seconds * 1000;
  // Answers are counted between the two CPU samples themselves, so a late timer skews nothing.
  let finished = 0;
  let atStart = { seconds: [] as number[], self: process.cpuUsage(), finished: 0 };
  const cpu = { seconds: watch.map(() => Number.NaN), self: Number.NaN, answers: 0 };
  const opened = setTimeout(() => {
    atStart = { seconds: watch.map(cpuSeconds), self: process.cpuUsage(), finished };
  }, warmup * 1000);
  let sampled = false;
  const sampleEnd = () => {
    if (sampled) return;
    sampled = true;
    cpu.seconds = watch.map((pid, i) => cpuSeconds(pid) - (atStart.seconds[i] ?? 0));
    const self = process.cpuUsage(atStart.self);
    cpu.self = (self.user + self.system) / 1e6;
    cpu.answers = finished - atStart.finished;
  };
  const closed = setTimeout(sampleEnd, (warmup + seconds) * 1000);
  const worker = async () => {
    while (performance.now() < end) {
      try {
        const began = performance.now();
        const ms = await once(target, agent);
        finished++;
        const done = performance.now();
        if (done >= measureFrom && done <= end) completed++;
        if (began >= measureFrom && began < end) latencies.push(ms);
      } catch {
        if (performance.now() >= measureFrom) errors++;
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  clearTimeout(opened);
  clearTimeout(closed);
  sampleEnd();
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const pick = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  return {
    requests: completed,
    errors,
    seconds,
    perSecond: completed / seconds,
    p50: pick(0.5),
    p99: pick(0.99),
    cpu,
  };
}
