/**
 * `pnpm bench`: what the runner costs on top of the harness, and how many rollouts a minute it
 * turns out at 1, 2 and 4 at once. pi solves a bundled task against the scripted upstream (a TEST
 * DOUBLE for the model server, so model time is near zero and what remains is the harness and the
 * runner), through the real guard, tasks and verifier processes and the real sandbox.
 *
 * Overhead = the rollout's total time minus the harness's own run time: guard session, sandbox,
 * configuration, parsing, trajectory and verifier. The harness run is the baseline beside it.
 */
import { RolloutResult } from "@bridle/contracts";
import { SLUGIFY_FIX as FIX, startRolloutStack, SLUGIFY_TASK as TASK } from "../src/test-stack.ts";

const BASE_PORT = Number(process.env.BENCH_BASE_PORT ?? 19740);
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 6);
const PER_LEVEL = Number(process.env.BENCH_PER_LEVEL ?? 8);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

const stack = await startRolloutStack(BASE_PORT, [TASK]);
let counter = 0;

async function rollout(): Promise<RolloutResult> {
  const res = await stack.app.request("/v1/rollouts", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      rolloutId: `bench-${process.pid}-${counter++}`,
      taskId: TASK,
      harness: "pi",
      model: "scripted-model",
      agentTimeoutSec: 120,
    }),
  });
  const result = RolloutResult.parse(await res.json());
  if (result.correctness !== 1) throw new Error(`a bench rollout did not pass: ${JSON.stringify(result)}`);
  return result;
}

/** Runs `count` rollouts, `concurrency` at a time; returns their results and the wall time. */
async function batch(count: number, concurrency: number) {
  const results: RolloutResult[] = [];
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        results.push(await rollout());
      }
    }),
  );
  return { results, wallMs: performance.now() - started };
}

try {
  // The test stack's script always selects by conversation, so concurrent rollouts get their turns.
  await stack.script([
    { tool_calls: [{ name: "read", arguments: { path: "slug.py" } }] },
    { tool_calls: [{ name: "write", arguments: { path: "slug.py", content: FIX } }] },
    { tool_calls: [{ name: "bash", arguments: { command: "python3 test_slug.py" } }] },
    { text: "Fixed slug.py; the test passes." },
  ]);
  await rollout(); // warm-up: the first start of pi and of the sandbox tools is not typical

  const levels = [1, 2, 4].map((c) => ({ c, count: c === 1 ? SEQUENTIAL : PER_LEVEL }));
  const runs = [];
  for (const { c, count } of levels) runs.push({ c, ...(await batch(count, c)) });

  const sequential = runs[0]!.results;
  const total = median(sequential.map((r) => r.durationsMs.total));
  const harness = median(sequential.map((r) => r.durationsMs.harness));
  const verifier = median(sequential.map((r) => r.durationsMs.verifier));
  const overhead = median(sequential.map((r) => r.durationsMs.total - r.durationsMs.harness));
  const rest = median(
    sequential.map((r) => r.durationsMs.total - r.durationsMs.harness - r.durationsMs.verifier),
  );
  console.log(
    `\nRunner overhead per rollout: pi, scripted upstream, ${sequential.length} sequential rollouts, medians`,
  );
  console.log(`  harness run (baseline)  ${sec(harness)}`);
  console.log(`  rollout total           ${sec(total)}`);
  console.log(
    `  runner overhead         ${sec(overhead)}  = ${(overhead / harness).toFixed(2)}x the harness run`,
  );
  console.log(`    verifier              ${sec(verifier)}`);
  console.log(`    guard session, sandbox, configuration, parsing, trajectory  ${sec(rest)}`);

  console.log("\nRollouts per minute (all rollouts pass verification)");
  console.log("  concurrent  rollouts  wall      rollouts/min  vs 1 at a time  median harness run");
  const base = (runs[0]!.results.length / runs[0]!.wallMs) * 60_000;
  for (const run of runs) {
    const perMin = (run.results.length / run.wallMs) * 60_000;
    const h = median(run.results.map((r) => r.durationsMs.harness));
    console.log(
      `  ${String(run.c).padEnd(10)}  ${String(run.results.length).padEnd(8)}  ${sec(run.wallMs).padEnd(8)}  ${perMin.toFixed(1).padEnd(12)}  ${`${(perMin / base).toFixed(2)}x`.padEnd(14)}  ${sec(h)}`,
    );
  }
} finally {
  await stack.stop();
}
