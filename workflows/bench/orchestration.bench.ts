/**
 * Orchestration overhead: the training-run workflow on a real Temporal dev server, with INSTANT
 * STAND-IN activities (no model, no sandbox), against calling the same stand-ins in a plain loop
 * with the same concurrency. Prints per-rollout and per-step cost side by side, and the ratio.
 *
 *   pnpm bench   (in workflows/)
 */
import { join } from "node:path";
import { runWorkflowId, TaskQueues, TrainingRunConfig } from "@bridle/contracts";
import { mapBounded } from "@bridle/service-kit/limit";
import { loadStackConfig } from "@bridle/stack";
import { Runtime } from "@temporalio/worker";
import type { Activities } from "../src/activities.ts";
import { standInActivities, startDevTemporal } from "../src/stand-ins.ts";

Runtime.install({ logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never });
const STEPS = 3;

/** Instant stand-ins: every other rollout scores 1, and every step trains. */
const standIns = () => standInActivities({ reward: (_request, n) => n % 2, applied: () => true });

async function plainLoop(group: number): Promise<number> {
  const a = standIns() as Activities;
  const started = performance.now();
  let cursor = 0;
  for (let step = 1; step <= STEPS; step++) {
    const sample = await a.sampleTasks({ seed: 0, cursor, size: 1 });
    const jobs = Array.from({ length: group }, (_, i) => ({ task: sample.tasks[0]!, i }));
    const results = await mapBounded(jobs, group, (j) =>
      a.runRollout({
        rolloutId: `b/${step}/${j.i}`,
        taskId: j.task.id,
        harness: "pi",
        model: "m",
        capture: true,
        guardMode: "block",
        rewardMode: "train",
        maxTurns: 1,
        contextWindow: 8192,
        labels: {},
      }),
    );
    const trained = await a.trainStep({
      run: "b",
      step,
      config: TrainingRunConfig.parse({ name: "b" }).train,
      batch: results.map((r) => ({ group: r.taskId, reward: r.reward!, guardSession: "s" })),
    });
    await a.loadAdapter({ name: "m/pi/b", version: step, run: "b", step, hash: trained.adapterHash });
    cursor = sample.nextCursor;
  }
  return performance.now() - started;
}

async function main() {
  const temporal = await startDevTemporal(join(loadStackConfig().venv, "bin", "temporal"));
  try {
    await temporal.work(standIns(), 128);
    const client = temporal.client;

    console.log(`Orchestration overhead, ${STEPS} steps of 1 task x G rollouts, instant stand-in activities`);
    console.log(
      "G (concurrent)  plain loop ms/step  workflow ms/step  workflow ms/rollout  ratio (workflow/plain)",
    );
    for (const group of [1, 16, 64]) {
      const plain = await plainLoop(group);
      const config = TrainingRunConfig.parse({
        name: `bench-${group}-${Date.now()}`,
        steps: STEPS,
        groupSize: group,
        concurrency: group,
      });
      const started = performance.now();
      await client.workflow.execute("trainingRun", {
        taskQueue: TaskQueues.control,
        workflowId: runWorkflowId(config.name),
        args: [{ config }],
      });
      const flow = performance.now() - started;
      console.log(
        `${String(group).padEnd(15)} ${(plain / STEPS).toFixed(2).padStart(18)}  ${(flow / STEPS).toFixed(1).padStart(16)}  ${(flow / STEPS / group).toFixed(2).padStart(19)}  ${(flow / plain).toFixed(0).padStart(10)}x`,
      );
    }
  } finally {
    await temporal.stop();
  }
}

await main();
