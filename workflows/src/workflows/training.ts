import {
  type AdapterRef,
  adapterName,
  adapterParts,
  DEFAULT_PROMOTION_MARGIN,
  type RolloutResult,
  type RunProgress,
  SearchAttributes,
  type StepMetrics,
  TaskQueues,
  type TrainingRunConfig,
} from "@bridle/contracts";
import { mapBounded } from "@bridle/service-kit/limit";
import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  executeChild,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from "@temporalio/workflow";
import type { Activities, BatchEntry } from "../activities.ts";
import { evaluation } from "./evaluation.ts";
import { lineage } from "./lineage.ts";
import { rolloutSeed } from "./seed.ts";

const { sampleTasks, recordMetrics } = proxyActivities<Activities>({
  startToCloseTimeout: "2 minutes",
  retry: { maximumInterval: "30 seconds", maximumAttempts: 50 },
});
const { runRollout } = proxyActivities<Activities>({
  taskQueue: TaskQueues.rollout,
  startToCloseTimeout: "6 hours",
  heartbeatTimeout: "30 seconds",
  retry: { initialInterval: "5 seconds", maximumInterval: "2 minutes", maximumAttempts: 50 },
});
// GPU work: when a GPU node dies its heartbeats stop, and the retry runs on another worker of the queue.
const { trainStep } = proxyActivities<Activities>({
  taskQueue: TaskQueues.training,
  startToCloseTimeout: "12 hours",
  heartbeatTimeout: "30 seconds",
  retry: { initialInterval: "5 seconds", maximumInterval: "1 minute", maximumAttempts: 100 },
});
const { loadAdapter } = proxyActivities<Activities>({
  taskQueue: TaskQueues.serving,
  startToCloseTimeout: "30 minutes",
  heartbeatTimeout: "30 seconds",
  retry: { initialInterval: "5 seconds", maximumInterval: "1 minute", maximumAttempts: 100 },
});

export const pauseSignal = defineSignal("pause");
export const resumeSignal = defineSignal("resume");
export const cancelSignal = defineSignal("cancel");
export const progressQuery = defineQuery<RunProgress>("progress");

const METRICS_KEPT = 20;

/**
 * A training run: per step, sample tasks, run a group of rollouts per task (bounded concurrency,
 * environment failures resampled), one GRPO step on the trainer, load and prove the new adapter
 * version, record the figures, evaluate every K steps. Pause, resume and cancel are signals;
 * `progress` is a query. Long runs continue as new with compact state when Temporal suggests it.
 * A step is applied exactly once: rollout ids and the trainer's (run, step) key are deterministic.
 */
export async function trainingRun(input: {
  config: TrainingRunConfig;
  state?: RunProgress;
}): Promise<RunProgress> {
  const { config } = input;
  const adapter = adapterName({ model: config.baseModel, harness: config.harness, run: config.name });
  const state: RunProgress = input.state ?? {
    name: config.name,
    phase: "starting",
    step: 0,
    steps: config.steps,
    paused: false,
    cancelRequested: false,
    adapter,
    adapterVersion: 0,
    servedName: config.baseModel,
    cursor: 0,
    environmentFailures: 0,
    rolloutsDone: 0,
    metrics: [],
  };
  setHandler(progressQuery, () => state);
  setHandler(pauseSignal, () => {
    state.paused = true;
  });
  setHandler(resumeSignal, () => {
    state.paused = false;
  });
  setHandler(cancelSignal, () => {
    state.cancelRequested = true;
  });
  // A run that continues its lineage starts from the promoted version: its weights, and its
  // rollouts sample that version until the run's own first one serves. (After the handlers: the
  // run answers its progress query while it reads the lineage.)
  if (!input.state && config.start === "promoted") await startFromPromoted(config, state);

  while (state.step < config.steps && !state.cancelRequested) {
    if (state.paused) {
      state.phase = "paused";
      await condition(() => !state.paused || state.cancelRequested);
      if (state.cancelRequested) break;
    }
    await runStep(config, state);
    if (workflowInfo().continueAsNewSuggested && state.step < config.steps) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof trainingRun>({ config, state });
    }
  }
  state.phase = state.cancelRequested ? "cancelled" : "done";
  return state;
}

async function startFromPromoted(config: TrainingRunConfig, state: RunProgress): Promise<void> {
  const key = { model: config.baseModel, harness: config.harness };
  const { promoted } = await lineage(key);
  if (!promoted)
    throw ApplicationFailure.nonRetryable(
      `no adapter of ${key.model} in ${key.harness} is promoted: start fresh, or promote a version first`,
      "nothing_promoted",
    );
  if (promoted.state !== "serving")
    throw ApplicationFailure.nonRetryable(
      `the promoted ${promoted.servedName} is ${promoted.state}${promoted.error ? ` (${promoted.error.code}: ${promoted.error.message})` : ""}: roll it back first`,
      "promoted_not_serving",
    );
  if (promoted.step === null)
    throw ApplicationFailure.nonRetryable(
      `${promoted.servedName} was loaded from a folder, not made by a trainer step: a run cannot continue it`,
      "parent_not_trained",
    );
  state.parent = {
    adapter: { name: promoted.name, version: promoted.version },
    servedName: promoted.servedName,
    step: { run: adapterParts(promoted.name)!.run, step: promoted.step, hash: promoted.hash },
  };
  state.servedName = promoted.servedName;
}

/** What the run's rollouts sample now: its own latest version, else the one it started from, else none. */
function sampledVersion(state: RunProgress): number | null {
  return state.adapterVersion || (state.parent?.adapter.version ?? null);
}

async function runStep(config: TrainingRunConfig, state: RunProgress): Promise<void> {
  const number = state.step + 1;
  // A draw whose every group scored one reward gives GRPO no signal: the step would be a no-op.
  // Such a step draws fresh tasks (at most `redrawFlat` times) and trains on the draw that has one.
  let cursor = state.cursor;
  let redraws = 0;
  let failures = 0;
  let resampled = 0;
  const results: RolloutResult[] = [];
  const categoryOf = new Map<string, string>();
  let batch: BatchEntry[] = [];
  for (;;) {
    state.phase = "sampling";
    const sample = await sampleTasks({
      seed: config.seed,
      cursor,
      size: config.batchSize,
      ...(config.categories ? { categories: config.categories } : {}),
      ...(config.tasks ? { ids: config.tasks } : {}),
      ...(config.unproven ? { unproven: true } : {}),
    });
    cursor = sample.nextCursor;
    for (const task of sample.tasks) categoryOf.set(task.id, task.category);
    state.phase = "rollouts";
    const draw = await rollouts(config, state, number, sample.tasks, redraws);
    failures += draw.failures;
    resampled += draw.resampled;
    results.push(...draw.results);
    // The trainer learns from the last draw: the one with a signal, or (redraws spent) a flat one
    // it records as a no-op.
    batch = toBatch(draw.results);
    if (hasSignal(batch)) break;
    if (config.groupSize < 2 || redraws >= (config.redrawFlat ?? 0)) break;
    if (!patched("redraw-flat-steps")) break;
    redraws++;
  }
  state.environmentFailures += failures;
  const valid = results.filter((r): r is RolloutResult & { reward: number } => r.reward !== null);

  let applied = false;
  let hash: string | null = null;
  let training: Pick<
    StepMetrics,
    "loss" | "kl" | "clipFraction" | "logprobDiff" | "tokensTrained" | "refusedSamples"
  > = {
    loss: null,
    kl: null,
    clipFraction: null,
    logprobDiff: null,
    tokensTrained: 0,
    refusedSamples: 0,
  };
  // A step without a usable rollout (every one an environment failure) still reaches the trainer,
  // which records it as a no-op: the trainer applies steps in order, and the next step would
  // otherwise be refused for a missing predecessor. Histories from before this skipped it.
  if (batch.length > 0 || patched("empty-steps-reach-the-trainer")) {
    state.phase = "training";
    const trained = await trainStep({
      run: config.name,
      step: number,
      config: { ...config.train, temperature: config.temperature },
      batch,
      served: { model: state.servedName, version: sampledVersion(state) },
      ...(number === 1 && state.parent ? { parent: state.parent.step } : {}),
    });
    applied = trained.applied;
    training = {
      loss: trained.loss,
      kl: trained.kl ?? null,
      clipFraction: trained.clipFraction ?? null,
      logprobDiff: trained.logprobDiff ?? null,
      tokensTrained: trained.tokens ?? 0,
      refusedSamples: trained.refused ?? 0,
    };
    if (trained.applied) {
      state.phase = "loading";
      // Its weights started from the run's previous version, or from the one the run started from.
      const parent: AdapterRef | null =
        state.adapterVersion > 0
          ? { name: state.adapter, version: state.adapterVersion }
          : (state.parent?.adapter ?? null);
      const version = await loadAdapter({
        parent,
        name: state.adapter,
        version: state.adapterVersion + 1,
        run: config.name,
        step: number,
        hash: trained.adapterHash,
      });
      state.adapterVersion = version.version;
      state.servedName = version.servedName;
      hash = version.hash;
    }
  }

  const metrics: StepMetrics = {
    step: number,
    rollouts: results.length,
    environmentFailures: failures,
    resampled,
    redraws,
    meanReward: mean(valid.map((r) => r.reward)),
    successRate: mean(valid.map((r) => (r.correctness === 1 ? 1 : 0))),
    meanToolCalls: mean(valid.map((r) => r.toolCalls.guard)),
    toolCallsPerSolved: mean(valid.filter((r) => r.correctness === 1).map((r) => r.toolCalls.guard)),
    categories: byCategory(valid, categoryOf),
    blocked: valid.reduce((n, r) => n + r.blocked.length, 0),
    toolCallFormats: addCounts(valid.map((r) => r.toolCallFormats ?? {})),
    stitching: addCounts(valid.map((r) => r.stitching ?? {})),
    applied,
    ...training,
    adapterVersion: state.adapterVersion || null,
    adapterHash: hash,
    evalScore: null,
    finishedAt: new Date().toISOString(),
  };
  if (config.evalEvery > 0 && number % config.evalEvery === 0 && state.adapterVersion > 0) {
    state.phase = "evaluating";
    // Promoting as it goes: each eval pits the newest version against what the lineage promotes
    // now (the base model when nothing is), so a pass promotes it.
    let baseline = config.baseModel;
    if (patched("lineage-decisions")) {
      const { promoted } = await lineage({ model: config.baseModel, harness: config.harness });
      if (promoted) baseline = promoted.servedName;
    }
    // A version already promoted (no newer one since) has nothing to be judged against.
    if (baseline !== state.servedName) {
      const output = await executeChild(evaluation, {
        workflowId: `${workflowInfo().workflowId}-eval-s${number}`,
        taskQueue: TaskQueues.control,
        args: [
          {
            ...evalDefaults(config),
            id: `${config.name}-eval-s${number}`,
            candidate: state.servedName,
            baseline,
          },
        ],
      });
      metrics.evalScore = output.report.overall.difference.estimate;
      upsertSearchAttributes([{ key: SearchAttributes.evalScore, value: metrics.evalScore }]);
    }
  }
  // The whole run's figures are kept by the trainer; the workflow carries only its latest steps.
  if (patched("metrics-kept-whole")) await recordMetrics({ run: config.name, metrics });
  state.cursor = cursor;
  state.step = number;
  state.metrics = [...state.metrics, metrics].slice(-METRICS_KEPT);
  upsertSearchAttributes([{ key: SearchAttributes.step, value: number }]);
}

/** One draw's rollouts: a group per task, bounded concurrency, environment failures resampled. */
async function rollouts(
  config: TrainingRunConfig,
  state: RunProgress,
  number: number,
  tasks: { id: string }[],
  draw: number,
): Promise<{ results: RolloutResult[]; failures: number; resampled: number }> {
  const jobs = tasks.flatMap((task) =>
    Array.from({ length: config.groupSize }, (_, member) => ({ task, member })),
  );
  let failures = 0;
  let resampled = 0;
  const results = await mapBounded(jobs, config.concurrency, async ({ task, member }) => {
    for (let attempt = 0; ; attempt++) {
      const rolloutId = `${config.name}/s${number}${draw > 0 ? `d${draw}` : ""}/${task.id}/g${member}${attempt > 0 ? `/r${attempt}` : ""}`;
      const result = await runRollout({
        rolloutId,
        taskId: task.id,
        harness: config.harness,
        model: state.servedName,
        capture: true,
        guardMode: "block",
        rewardMode: "train",
        temperature: config.temperature,
        seed: rolloutSeed(config.seed, rolloutId),
        maxTurns: config.maxTurns,
        contextWindow: config.contextWindow,
        ...(config.agentTimeoutSec ? { agentTimeoutSec: config.agentTimeoutSec } : {}),
        labels: { run: config.name, step: String(number) },
      });
      state.rolloutsDone++;
      if (!result.environmentFailure) return result;
      failures++;
      if (attempt >= config.resampleLimit) return result;
      resampled++;
    }
  });
  return { results, failures, resampled };
}

/** Each task category's valid rollouts of a step, their success rate and mean reward. */
function byCategory(
  valid: (RolloutResult & { reward: number })[],
  categoryOf: Map<string, string>,
): StepMetrics["categories"] {
  const groups = new Map<string, (RolloutResult & { reward: number })[]>();
  for (const r of valid) {
    const category = categoryOf.get(r.taskId) ?? "unknown";
    groups.set(category, [...(groups.get(category) ?? []), r]);
  }
  return Object.fromEntries(
    [...groups].map(([category, rs]) => [
      category,
      {
        rollouts: rs.length,
        successRate: mean(rs.map((r) => (r.correctness === 1 ? 1 : 0))),
        meanReward: mean(rs.map((r) => r.reward)),
      },
    ]),
  );
}

/** The trainer's batch: scored rollouts whose trajectory the guard recorded. */
function toBatch(results: RolloutResult[]): BatchEntry[] {
  return results
    .filter((r) => r.reward !== null && r.refs.guardSession !== null)
    .map((r) => ({
      group: r.taskId,
      reward: r.reward!,
      guardSession: r.refs.guardSession!,
      ...(r.refs.trajectory ? { trajectory: r.refs.trajectory } : {}),
    }));
}

/** Whether some group holds two different rewards: GRPO's advantage is zero in every other group. */
export function hasSignal(batch: BatchEntry[]): boolean {
  const seen = new Map<string, number>();
  for (const entry of batch) {
    const first = seen.get(entry.group);
    if (first === undefined) seen.set(entry.group, entry.reward);
    else if (first !== entry.reward) return true;
  }
  return false;
}

function evalDefaults(config: TrainingRunConfig) {
  return {
    harness: config.harness,
    baseline: config.baseModel,
    limit: config.evalTasks,
    attempts: 1,
    temperature: config.temperature,
    seed: config.seed,
    promotionMargin: DEFAULT_PROMOTION_MARGIN,
    concurrency: config.concurrency,
    maxTurns: config.maxTurns,
    contextWindow: config.contextWindow,
    ...(config.agentTimeoutSec ? { agentTimeoutSec: config.agentTimeoutSec } : {}),
  };
}

function addCounts(counts: Record<string, number>[]): Record<string, number> {
  const total: Record<string, number> = {};
  for (const c of counts) for (const [k, v] of Object.entries(c)) total[k] = (total[k] ?? 0) + v;
  return total;
}

const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);
