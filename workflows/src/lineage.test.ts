import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type AdapterVersion,
  EvalConfig,
  type EvalOutput,
  type LineageDecision,
  type RolloutRequest,
  type RunProgress,
  servedName,
  TaskQueues,
  TrainingRunConfig,
} from "@bridle/contracts";
import { WorkflowFailedError } from "@temporalio/client";
import { Runtime } from "@temporalio/worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Activities, TrainStepInput } from "./activities.ts";
import { type DevTemporal, standInActivities, startDevTemporal } from "./stand-ins.ts";

/**
 * Promotion and rollback on a real Temporal dev server, with SCRIPTED STAND-IN ACTIVITIES: rollout
 * rewards come from the script, and serving's lineage (promoted version, decisions) is a stand-in
 * kept in memory here. Serving's own decision rules are tested in services/serving
 * (lineages.test.ts); the real path end to end in test/ (lineage.test.ts).
 */
const home = resolve(process.env.BRIDLE_HOME ?? fileURLToPath(new URL("../../.bridle", import.meta.url)));
const temporalBin = join(home, "venv", "bin", "temporal");
const TASKS = 12;

describe("an adapter lineage: promoted as a run goes, continued by the next run, rolled back on regression", () => {
  let temporal: DevTemporal;
  /** The model whose evaluation rollouts solve their task; every other model fails them. */
  let solver = "m/pi/a@v2";
  const versions = new Map<string, AdapterVersion>();
  const decisions: LineageDecision[] = [];
  const heldOutAsked: Parameters<Activities["heldOutTasks"]>[0][] = [];
  let promoted: AdapterVersion | null = null;
  const steps: TrainStepInput[] = [];
  const rollouts: RolloutRequest[] = [];
  const loads: Parameters<Activities["loadAdapter"]>[0][] = [];

  beforeAll(async () => {
    if (!existsSync(temporalBin)) throw new Error(`no Temporal CLI at ${temporalBin}: run ./bridle install`);
    Runtime.install({
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never,
    });
    temporal = await startDevTemporal(temporalBin);
    const base = standInActivities({
      // Training: one of each group solves (a signal every step); evaluation: only `solver` does.
      reward: (request) =>
        request.rewardMode === "eval"
          ? Number(request.model === solver)
          : Number(request.rolloutId!.endsWith("g1")),
      applied: () => true,
      onRollout: (request) => rollouts.push(request),
    });
    await temporal.work({
      ...base,
      async trainStep(input) {
        steps.push(input);
        return base.trainStep!(input);
      },
      async loadAdapter(input) {
        loads.push(input);
        const v = await base.loadAdapter!(input);
        versions.set(v.servedName, v);
        return v;
      },
      async heldOutTasks(input) {
        heldOutAsked.push(input);
        return Array.from({ length: Math.min(input.limit, TASKS) }, (_, i) => ({
          id: `held-${i}`,
          category: "repair",
          hash: "h",
          impossible: false,
          // As the registry marks a task without a reference solution, listed when asked for.
          ...(input.unproven && i === 0 ? { unproven: true } : {}),
        }));
      },
      async resolveServed(model) {
        const v = versions.get(model);
        return { version: v?.version ?? null, hash: v?.hash ?? null };
      },
      async writeReport({ id }) {
        return { json: `/evals/${id}/report.json`, markdown: `/evals/${id}/report.md` };
      },
      async lineage(key) {
        return { ...key, promoted, decisions: [...decisions], adapters: [] };
      },
      async decide({ request }) {
        const earlier = decisions.find((d) => d.id === request.id);
        if (earlier) return earlier;
        const named = versions.get(servedName(request.adapter.name, request.adapter.version))!;
        const before = promoted && { name: promoted.name, version: promoted.version };
        if (request.action === "promote") promoted = named;
        else {
          const by = decisions.findLast((d) => d.action === "promote" && d.adapter?.name === named.name);
          promoted = by?.previous ? versions.get(servedName(by.previous.name, by.previous.version))! : null;
        }
        const decision: LineageDecision = {
          id: request.id,
          action: request.action,
          adapter: promoted && { name: promoted.name, version: promoted.version },
          previous: before,
          reason: request.reason,
          evalId: request.evalId,
          at: new Date().toISOString(),
        };
        decisions.push(decision);
        return decision;
      },
    });
  }, 120_000);

  afterAll(async () => temporal?.stop());

  const train = (fields: Partial<TrainingRunConfig> & { name: string }) => {
    const config = TrainingRunConfig.parse({
      baseModel: "m",
      harness: "pi",
      batchSize: 1,
      groupSize: 2,
      evalTasks: TASKS,
      ...fields,
    });
    return temporal.client.workflow.execute("trainingRun", {
      taskQueue: TaskQueues.control,
      workflowId: `run-${config.name}`,
      args: [{ config }],
    }) as Promise<RunProgress>;
  };
  const evaluate = (id: string, candidate: string, harness = "pi", unproven?: boolean) =>
    temporal.client.workflow.execute("evaluation", {
      taskQueue: TaskQueues.control,
      workflowId: `eval-${id}`,
      args: [{ ...EvalConfig.parse({ harness, candidate, baseline: "m", limit: TASKS, unproven }), id }],
    }) as Promise<EvalOutput>;
  /** The workflow ids a visibility query finds (eventually consistent: asked until it answers). */
  async function found(query: string): Promise<string[]> {
    for (let i = 0; i < 50; i++) {
      const ids: string[] = [];
      for await (const w of temporal.client.workflow.list({ query })) ids.push(w.workflowId);
      if (ids.length > 0) return ids;
      await new Promise((r) => setTimeout(r, 200));
    }
    return [];
  }

  it("promotes the run's version when its eval passes the gate against the base model", async () => {
    const done = await train({ name: "a", steps: 2, evalEvery: 2 });
    expect(done.metrics.at(-1)).toMatchObject({ step: 2, evalScore: 1 });
    expect(promoted?.servedName).toBe("m/pi/a@v2");
    expect(decisions).toHaveLength(1);
    expect(decisions[0]).toMatchObject({
      id: "promote-run-a-eval-s2",
      action: "promote",
      previous: null,
      evalId: "a-eval-s2",
    });
    expect(decisions[0]!.reason).toContain("passed the gate against m");
    // Versions record their parents: v2 grew from v1, v1 from nothing (a fresh run).
    expect(loads.map((l) => l.parent)).toEqual([null, { name: "m/pi/a", version: 1 }]);
    expect(await found(`BridleKind = "promotion" AND BridleHarness = "pi" AND BridleRun = "a"`)).toEqual([
      "promote-run-a-eval-s2",
    ]);
  }, 120_000);

  it("starts the next run from the promoted version: its weights, its samples, its lineage", async () => {
    steps.length = 0;
    rollouts.length = 0;
    loads.length = 0;
    const done = await train({ name: "b", steps: 2, start: "promoted" });
    expect(done.parent).toEqual({
      adapter: { name: "m/pi/a", version: 2 },
      servedName: "m/pi/a@v2",
      step: { run: "a", step: 2, hash: "h2" },
    });
    // Step 1 trains from the parent's committed step, on samples the parent version served.
    expect(steps[0]).toMatchObject({ step: 1, parent: { run: "a", step: 2, hash: "h2" } });
    expect(steps[0]!.served).toEqual({ model: "m/pi/a@v2", version: 2 });
    expect(steps[1]!.parent).toBeUndefined();
    expect(steps[1]!.served).toEqual({ model: "m/pi/b@v1", version: 1 });
    expect(new Set(rollouts.filter((r) => r.rolloutId!.startsWith("b/s1/")).map((r) => r.model))).toEqual(
      new Set(["m/pi/a@v2"]),
    );
    expect(loads.map((l) => l.parent)).toEqual([
      { name: "m/pi/a", version: 2 },
      { name: "m/pi/b", version: 1 },
    ]);
  }, 120_000);

  it("keeps the promoted version when an eval neither passes nor regresses", async () => {
    const output = await evaluate("tie", "m/pi/b@v2"); // both arms fail every task
    expect(output.report.verdict?.decision).toBe("keep");
    expect(output.decision).toBeNull();
    expect(promoted?.servedName).toBe("m/pi/a@v2");
  }, 120_000);

  it("rolls the promoted version back when an eval of it regresses, with the eval's figures as reason", async () => {
    solver = "m"; // the base model now solves what the promoted adapter fails
    const output = await evaluate("regress", "m/pi/a@v2");
    expect(output.report.verdict?.checks.regressed).toBe(true);
    expect(output.decision).toMatchObject({ action: "rollback", workflowId: "rollback-eval-regress" });
    expect(promoted).toBeNull();
    expect(decisions.at(-1)).toMatchObject({
      action: "rollback",
      adapter: null,
      previous: { name: "m/pi/a", version: 2 },
      evalId: "regress",
    });
    expect(decisions.at(-1)!.reason).toMatch(/regressed against m in evaluation regress: .*upper bound/);
    expect(await found(`BridleKind = "rollback" AND BridleModel = "m"`)).toEqual(["rollback-eval-regress"]);
  }, 120_000);

  it("leaves the lineage alone when the adapter is judged in another harness (the matrix)", async () => {
    solver = "m/pi/b@v2";
    const output = await evaluate("elsewhere", "m/pi/b@v2", "opencode");
    expect(output.report.verdict?.decision).toBe("promote");
    expect(output.decision).toBeNull();
    expect(promoted).toBeNull();
  }, 120_000);

  it("judges unproven held-out tasks only when asked, and marks them in the report", async () => {
    heldOutAsked.length = 0;
    // In another harness than the lineage's, so the verdicts leave it alone.
    const plain = await evaluate("proven-only", "m/pi/b@v2", "opencode");
    const marked = await evaluate("with-unproven", "m/pi/b@v2", "opencode", true);
    expect(heldOutAsked.map((input) => input.unproven)).toEqual([undefined, true]);
    expect(plain.report.byTask.some((t) => t.unproven)).toBe(false);
    expect(marked.report.byTask.filter((t) => t.unproven).map((t) => t.taskId)).toEqual(["held-0"]);
    expect(marked.markdown).toContain("| held-0 (unproven) | repair |");
  }, 60_000);

  it("refuses to start from the lineage when nothing is promoted", async () => {
    const failed = await train({ name: "c", steps: 1, start: "promoted" }).catch((err) => err);
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect((failed as WorkflowFailedError).cause).toMatchObject({ type: "nothing_promoted" });
    expect((failed as WorkflowFailedError).cause?.message).toContain("no adapter of m in pi is promoted");
  }, 60_000);
});
