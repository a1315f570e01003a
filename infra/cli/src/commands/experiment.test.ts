import { type EvalReport, StepMetrics } from "@bridle/contracts";
import { loadStackConfig } from "@bridle/stack";
import { describe, expect, it } from "vitest";
import { buildExperimentReport, judgingId, reproducingCommand, trainingThroughput } from "./experiment.ts";

const config = loadStackConfig({});

interface Arms {
  adapter: number;
  base: number;
  ci: [number, number];
  calls?: [number, number];
}

/** A paired comparison as the evaluation reports it (the statistics have their own tests). */
function comparison({ adapter, base, ci, calls = [4, 4] }: Arms, tasks = 12) {
  const arm = (rate: number, toolCalls: number) => ({
    successRate: { estimate: rate, low: null, high: null },
    solved: Math.round(rate * tasks * 2),
    attempts: tasks * 2,
    toolCallsPerSolved: toolCalls,
    hackRate: { estimate: 0, low: 0, high: 0.1 },
    blockedByRule: {},
  });
  return {
    tasks,
    candidate: arm(adapter, calls[0]),
    baseline: arm(base, calls[1]),
    difference: { estimate: adapter - base, low: ci[0], high: ci[1] },
    hackDifference: { estimate: 0, low: -0.1, high: 0.1 },
    hackRateRose: false,
    hackChecks: { tasks: 0, candidatePasses: 0, baselinePasses: 0 },
    bothSolved: {
      tasks: 5,
      candidateToolCalls: calls[0],
      baselineToolCalls: calls[1],
      ratio: calls[0] / calls[1],
    },
  };
}

const report = (arms: Arms) => {
  const overall = comparison(arms);
  const evaluation: EvalReport = {
    candidate: "m/pi/exp@v4",
    baseline: "m",
    harness: "pi",
    attemptsPerTask: 2,
    temperature: 0.8,
    overall,
    categories: [
      { ...comparison(arms, 6), category: "build" },
      { ...comparison(arms, 6), category: "repair" },
    ],
    byTask: [],
    environmentFailures: [],
    servedBy: [],
    rewardKeys: {},
    verdict: null,
  };
  return buildExperimentReport({
    name: "exp",
    config,
    harness: "pi",
    steps: 4,
    seed: 7,
    temperature: 0.8,
    candidate: "m/pi/exp@v4",
    curves: [],
    eval: evaluation,
    wallSeconds: 60,
    command: "bridle experiment --seed 7",
  });
};

describe("the experiment's verdict", () => {
  it("carries every field the learning goal is judged on", () => {
    const r = report({ adapter: 0.6, base: 0.4, ci: [-0.05, 0.45] });
    expect(r).toMatchObject({ model: config.modelName, harness: "pi", steps: 4, seed: 7, wallSeconds: 60 });
    expect(r.command).toBe("bridle experiment --seed 7");
    expect(r.heldOut).toEqual({ tasks: 12, attempts: 2 });
    expect(r.success).toEqual({ base: 0.4, adapter: 0.6, diff: expect.closeTo(0.2), ci95: [-0.05, 0.45] });
    expect(r.callsPerSolved).toEqual({ base: 4, adapter: 4 });
    expect(r.hackRate).toEqual({ base: 0, adapter: 0, rose: false });
    expect(r.categories.map((c) => c.category)).toEqual(["build", "repair"]);
  });

  it("is met when the paired 95% interval of the success difference excludes 0", () => {
    const r = report({ adapter: 0.7, base: 0.3, ci: [0.1, 0.7] });
    expect(r.goalMet).toBe(true);
    expect(r.verdict).toMatch(/beats the base/);
  });

  it("is met by 20% fewer tool calls only when success is non-inferior", () => {
    const fewer = report({ adapter: 0.5, base: 0.5, ci: [-0.04, 0.04], calls: [3, 5] });
    expect(fewer.callsOnBothSolved.reduction).toBeCloseTo(0.4);
    expect(fewer.goalMet).toBe(true);
    expect(fewer.verdict).toMatch(/40% fewer tool calls/);
    const worse = report({ adapter: 0.4, base: 0.5, ci: [-0.3, 0.1], calls: [3, 5] });
    expect(worse.goalMet).toBe(false);
    expect(worse.verdict).toMatch(/^not shown/);
  });

  it("is not met, and says so, when the adapter is no better", () => {
    const r = report({ adapter: 0.5, base: 0.5, ci: [-0.2, 0.2] });
    expect(r.goalMet).toBe(false);
    expect(r.verdict).toMatch(/^not shown: success 50\.0% vs 50\.0%/);
  });
});

describe("the experiment's training throughput", () => {
  const step = (n: number, rollouts: number, finishedAt: string) =>
    StepMetrics.parse({
      step: n,
      rollouts,
      environmentFailures: 0,
      resampled: 0,
      meanReward: null,
      successRate: null,
      meanToolCalls: null,
      blocked: 0,
      applied: true,
      loss: null,
      adapterVersion: n,
      adapterHash: null,
      evalScore: null,
      finishedAt,
    });

  it("counts the rollouts of steps 2..N over the time since step 1 ended, in any order", () => {
    const curves = [
      step(3, 12, "2026-12-01T10:20:00Z"),
      step(1, 12, "2026-12-01T10:00:00Z"),
      step(2, 12, "2026-12-01T10:10:00Z"),
    ];
    expect(trainingThroughput(curves)).toEqual({
      rollouts: 24,
      seconds: 1200,
      rolloutsPerHour: 72,
      secondsPerStep: 600,
    });
  });

  it("is not measured with one step, or steps with no time between them", () => {
    expect(trainingThroughput([step(1, 12, "2026-12-01T10:00:00Z")])).toBeNull();
    expect(
      trainingThroughput([step(1, 12, "2026-12-01T10:00:00Z"), step(2, 12, "2026-12-01T10:00:00Z")]),
    ).toBeNull();
  });
});

describe("the experiment's evaluation id", () => {
  const settings = { candidate: "m/pi/run@v5", attempts: 2, heldOut: ["a", "b"], seed: 3 };

  it("is the same for the same judging, so a rerun reuses the completed evaluation", () => {
    expect(judgingId("run", settings)).toBe(judgingId("run", { ...settings }));
    expect(judgingId("run", settings)).toMatch(/^run-eval-[0-9a-f]{8}$/);
  });

  it("differs when anything that decides the judging differs (more attempts run anew)", () => {
    const base = judgingId("run", settings);
    expect(judgingId("run", { ...settings, attempts: 6 })).not.toBe(base);
    expect(judgingId("run", { ...settings, candidate: "m/pi/run@v6" })).not.toBe(base);
    expect(judgingId("run", { ...settings, heldOut: ["a"] })).not.toBe(base);
    expect(judgingId("other", settings)).not.toBe(base);
  });
});

describe("the experiment's rerun command", () => {
  it("names the settings that shape the results before the arguments, and no other", () => {
    const settings = {
      BRIDLE_MAX_TOKENS: "256",
      BRIDLE_PORT_BASE: "9000",
      BRIDLE_MODEL: "qwen2.5-coder-1.5b",
    };
    expect(reproducingCommand({ settings }, ["--full", "--seed", "4"])).toBe(
      "BRIDLE_MODEL=qwen2.5-coder-1.5b BRIDLE_MAX_TOKENS=256 bridle experiment --full --seed 4",
    );
    expect(reproducingCommand({ settings: {} }, ["--full"])).toBe("bridle experiment --full");
  });
});
