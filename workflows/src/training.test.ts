import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type RolloutRequest,
  type RunProgress,
  type StepMetrics,
  TaskQueues,
  TrainingRunConfig,
} from "@bridle/contracts";
import { Runtime } from "@temporalio/worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BatchEntry } from "./activities.ts";
import { type DevTemporal, standInActivities, startDevTemporal } from "./stand-ins.ts";
import { hasSignal } from "./workflows/training.ts";

/**
 * The training run's control flow on a real Temporal dev server, with SCRIPTED STAND-IN ACTIVITIES
 * (no model, sandbox or trainer: each rollout's reward comes from the test's script). What the
 * real services do is covered by the end-to-end tests in test/; this pins down what the workflow
 * decides from their answers.
 */
const home = resolve(process.env.BRIDLE_HOME ?? fileURLToPath(new URL("../../.bridle", import.meta.url)));
const temporalBin = join(home, "venv", "bin", "temporal");

describe("hasSignal", () => {
  const entry = (group: string, reward: number): BatchEntry => ({ group, reward, guardSession: "s" });
  it("is false when every group scored one reward, and for groups of one", () => {
    expect(hasSignal([])).toBe(false);
    expect(hasSignal([entry("a", 0), entry("a", 0), entry("b", 1), entry("b", 1)])).toBe(false);
    expect(hasSignal([entry("a", 0), entry("b", 1)])).toBe(false);
  });
  it("is true when some group holds two different rewards", () => {
    expect(hasSignal([entry("a", 0), entry("a", 0), entry("b", 0), entry("b", 0.5)])).toBe(true);
  });
});

describe("a step whose every group scored one reward draws again", () => {
  let temporal: DevTemporal;
  const rollouts: RolloutRequest[] = [];
  const samples: { unproven?: boolean; seed: number }[] = [];
  const batches: BatchEntry[][] = [];
  const recorded: { run: string; metrics: StepMetrics }[] = [];

  beforeAll(async () => {
    if (!existsSync(temporalBin)) throw new Error(`no Temporal CLI at ${temporalBin}: run ./bridle install`);
    Runtime.install({
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never,
    });
    temporal = await startDevTemporal(temporalBin);
    await temporal.work(
      standInActivities({
        // Tasks drawn first (cursor 0) all score 0; later draws score 0 and 1 within their group.
        reward: (request) =>
          request.taskId.startsWith("c0-") ? 0 : Number(request.rolloutId!.endsWith("g1")),
        applied: hasSignal,
        onRollout: (request) => rollouts.push(request),
        onSample: (input) => samples.push(input),
        onTrain: (batch) => batches.push(batch),
        onMetrics: (run, metrics) => recorded.push({ run, metrics }),
      }),
    );
  }, 120_000);

  afterAll(async () => temporal?.stop());

  const run = (config: TrainingRunConfig) =>
    temporal.client.workflow.execute("trainingRun", {
      taskQueue: TaskQueues.control,
      workflowId: `run-${config.name}`,
      args: [{ config }],
    }) as Promise<RunProgress>;

  it("trains on the fresh draw, records the redraw, and moves the cursor past both draws", async () => {
    rollouts.length = 0;
    batches.length = 0;
    const config = TrainingRunConfig.parse({ name: "redraw", steps: 1, batchSize: 1, groupSize: 2 });
    const done = await run(config);
    expect(rollouts.map((r) => r.rolloutId).sort()).toEqual([
      "redraw/s1/c0-t/g0",
      "redraw/s1/c0-t/g1",
      "redraw/s1d1/c1-t/g0",
      "redraw/s1d1/c1-t/g1",
    ]);
    // Only the draw with a signal is trained on: the flat one would only dilute it.
    expect(batches).toHaveLength(1);
    expect(batches[0]!.map((b) => b.group)).toEqual(["c1-t", "c1-t"]);
    const metrics = done.metrics[0]!;
    expect(metrics).toMatchObject({ redraws: 1, rollouts: 4, applied: true, meanReward: 0.25 });
    // Per category and per solved task (one of the four rollouts solved its task, with one call).
    expect(metrics.categories).toEqual({ repair: { rollouts: 4, successRate: 0.25, meanReward: 0.25 } });
    expect(metrics.toolCallsPerSolved).toBe(1);
    // The whole run's figures go to the trainer's record, step by step.
    expect(recorded.filter((r) => r.run === "redraw")).toEqual([{ run: "redraw", metrics }]);
    expect(done.cursor).toBe(2);
  }, 60_000);

  it("gives up after redrawFlat draws and lets the trainer record the step as a no-op", async () => {
    rollouts.length = 0;
    batches.length = 0;
    const config = TrainingRunConfig.parse({
      name: "no-redraw",
      steps: 1,
      batchSize: 1,
      groupSize: 2,
      redrawFlat: 0,
    });
    const done = await run(config);
    expect(rollouts).toHaveLength(2);
    expect(batches).toHaveLength(1);
    expect(done.metrics[0]).toMatchObject({ redraws: 0, rollouts: 2, applied: false });
    expect(done.cursor).toBe(1);
  }, 60_000);

  it("asks for unproven tasks (no reference solution) only when the run says so", async () => {
    samples.length = 0;
    const config = (name: string, unproven?: boolean) =>
      TrainingRunConfig.parse({ name, steps: 1, batchSize: 1, groupSize: 2, redrawFlat: 0, unproven });
    await run(config("proven-only"));
    await run(config("unproven", true));
    expect(samples.map((s) => s.unproven)).toEqual([undefined, true]);
  }, 60_000);
});
