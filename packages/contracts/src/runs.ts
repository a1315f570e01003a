import { z } from "zod";
import { DEFAULT_PROMOTION_MARGIN, EvalReport } from "./evaluation.ts";
import { WorkflowStatus } from "./probe.ts";
import { AdapterRef, LineageDecision } from "./serving.ts";
import { Calibration, TaskCategory } from "./tasks.ts";
import { RunId, Seed, StepRef, TrainConfig } from "./training.ts";

/** How each rollout of a training run or an evaluation runs: the same fields, the same defaults. */
const rolloutLimits = {
  concurrency: z.number().int().min(1).max(64).default(2).describe("Rollouts in flight at once"),
  maxTurns: z.number().int().min(1).max(200).default(17),
  agentTimeoutSec: z
    .number()
    .positive()
    .max(24 * 3600)
    .optional(),
  contextWindow: z.number().int().min(1_024).default(8_192),
};

/** A training run's configuration: what the user starts, validated at the gateway. */
export const TrainingRunConfig = z
  .object({
    name: RunId.describe("The run's name: part of its workflow id and its adapter's name"),
    baseModel: z.string().min(1).default("smollm2-135m").describe("Served name of the base model"),
    harness: z.string().min(1).default("pi"),
    steps: z.number().int().min(1).max(100_000).default(2),
    batchSize: z.number().int().min(1).max(256).default(1).describe("Tasks per step"),
    groupSize: z.number().int().min(1).max(64).default(2).describe("Rollouts per task (the GRPO group)"),
    seed: Seed.default(0),
    temperature: z
      .number()
      .min(0)
      .max(2)
      .default(0.8)
      .describe(
        "Sampling temperature of every training rollout's calls (top_p 1, no top-k: logprobs stay exact)",
      ),
    categories: z.array(TaskCategory).min(1).optional(),
    tasks: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe("Train on these tasks only (ids of training tasks whose controls passed)"),
    unproven: z
      .boolean()
      .default(false)
      .describe(
        "Also train on tasks with no reference solution whose nop control passed (their oracle could not run), as TermiGen's environments ship; a task no rollout solves gives no GRPO signal",
      ),
    ...rolloutLimits,
    resampleLimit: z
      .number()
      .int()
      .min(0)
      .max(10)
      .default(2)
      .describe("Retries of an environment-failed rollout"),
    redrawFlat: z
      .number()
      .int()
      .min(0)
      .max(10)
      .default(1)
      .describe(
        "Fresh task draws for a step whose every group scored one reward (no GRPO signal), before it trains",
      ),
    start: z
      .enum(["fresh", "promoted"])
      .default("fresh")
      .describe(
        "fresh: a new LoRA; promoted: the promoted adapter of (baseModel, harness), continuing its lineage (refused when none is promoted)",
      ),
    train: TrainConfig.default(TrainConfig.parse({})),
    evalEvery: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe("Evaluate every K steps; 0 = never during the run"),
    evalTasks: z.number().int().min(1).max(1_000).default(4),
  })
  .strict();
export type TrainingRunConfig = z.infer<typeof TrainingRunConfig>;

/** One step's figures, as the run records them. */
export const StepMetrics = z.object({
  step: z.number().int(),
  rollouts: z.number().int(),
  environmentFailures: z.number().int(),
  resampled: z.number().int(),
  redraws: z
    .number()
    .int()
    .default(0)
    .describe("Task draws redone because every group of the previous draw scored one reward"),
  meanReward: z.number().nullable(),
  successRate: z.number().nullable(),
  meanToolCalls: z.number().nullable(),
  toolCallsPerSolved: z
    .number()
    .nullable()
    .default(null)
    .describe("Mean tool calls of the step's solved rollouts; null when none was solved"),
  categories: z
    .record(
      z.string(),
      z.object({
        rollouts: z.number().int(),
        successRate: z.number().nullable(),
        meanReward: z.number().nullable(),
      }),
    )
    .default({})
    .describe("The step's valid rollouts per task category"),
  blocked: z.number().int(),
  applied: z.boolean(),
  loss: z.number().nullable(),
  kl: z
    .number()
    .nullable()
    .default(null)
    .describe("KL(policy || base) on the step's tokens, before its update"),
  clipFraction: z.number().nullable().default(null),
  logprobDiff: z
    .number()
    .nullable()
    .default(null)
    .describe("Mean |trainer - model server| logprob of the sampled tokens"),
  tokensTrained: z.number().int().default(0),
  refusedSamples: z
    .number()
    .int()
    .default(0)
    .describe("Samples not trained on: a call of theirs was not proven served by the step's adapter version"),
  toolCallFormats: z
    .record(z.string(), z.number().int())
    .default({})
    .describe("Tool calls the model server parsed, by the format the model wrote them in"),
  stitching: z
    .record(z.string(), z.number().int())
    .default({})
    .describe(
      "The step's model calls by how each joined its conversation: `token-ids` (the prompt extends the last call's prompt and answer token for token), `messages` (only the messages do: the answer was re-rendered), `new-branch`",
    ),
  adapterVersion: z.number().int().nullable(),
  adapterHash: z.string().nullable(),
  evalScore: z.number().nullable(),
  finishedAt: z.string(),
});
export type StepMetrics = z.infer<typeof StepMetrics>;

/** A run's figures as the trainer keeps them: every step in order. */
export const RunMetricsList = z.object({ run: RunId, metrics: z.array(StepMetrics) });
export type RunMetricsList = z.infer<typeof RunMetricsList>;

export const RunPhase = z.enum([
  "starting",
  "sampling",
  "rollouts",
  "training",
  "loading",
  "evaluating",
  "paused",
  "done",
  "cancelled",
]);

/** What a run's `progress` query answers; also what continue-as-new carries (kept compact). */
export const RunProgress = z.object({
  name: z.string(),
  phase: RunPhase,
  step: z.number().int().describe("Steps completed"),
  steps: z.number().int(),
  paused: z.boolean(),
  cancelRequested: z.boolean(),
  adapter: z.string().describe("<model>/<harness>/<run>"),
  adapterVersion: z.number().int().describe("Latest serving version; 0 = base model only"),
  servedName: z.string().describe("What rollouts sample: the latest version, or the base model"),
  parent: z
    .object({ adapter: AdapterRef, servedName: z.string(), step: StepRef })
    .nullable()
    .optional()
    .describe("The promoted version the run started from; null or absent when it started fresh"),
  cursor: z.number().int(),
  environmentFailures: z.number().int(),
  rolloutsDone: z.number().int(),
  metrics: z.array(StepMetrics).describe("The most recent steps (older ones are in the history)"),
});
export type RunProgress = z.infer<typeof RunProgress>;

export const EvalConfig = z
  .object({
    id: RunId.optional(),
    harness: z.string().min(1).default("pi"),
    candidate: z.string().min(1).describe("Served name of the adapter version to evaluate"),
    baseline: z.string().min(1).default("smollm2-135m").describe("Base model or another adapter version"),
    tasks: z.array(z.string().min(1)).min(1).optional().describe("Default: the held-out split"),
    limit: z.number().int().min(1).max(1_000).default(100).describe("First N held-out tasks"),
    unproven: z
      .boolean()
      .optional()
      .describe(
        "Also judge on held-out tasks with no reference solution whose nop control passed; the report marks them",
      ),
    attempts: z.number().int().min(1).max(16).default(1),
    temperature: z.number().min(0).max(2).default(0.8),
    seed: Seed.default(0).describe("Seeds each (task, attempt)'s sampling, the same for both arms"),
    promotionMargin: z
      .number()
      .min(-1)
      .max(0)
      .default(DEFAULT_PROMOTION_MARGIN)
      .describe("The promotion gate's non-inferiority margin on the paired success difference"),
    ...rolloutLimits,
  })
  .strict();
export type EvalConfig = z.infer<typeof EvalConfig>;

export const EvalOutput = z.object({
  id: z.string(),
  report: EvalReport,
  markdown: z.string(),
  files: z.object({ json: z.string(), markdown: z.string() }),
  decision: z
    .object({ action: z.enum(["promote", "rollback"]), workflowId: z.string(), outcome: LineageDecision })
    .nullable()
    .default(null)
    .describe("What the verdict changed in the candidate's lineage; null when nothing"),
});
export type EvalOutput = z.infer<typeof EvalOutput>;

/** Measure tasks' base success: k rollouts each of one model in one harness, at one temperature. */
export const CalibrationConfig = z
  .object({
    id: RunId.optional(),
    harness: z.string().min(1).default("pi"),
    model: z.string().min(1).describe("Served name of the model to measure (the base model)"),
    tasks: z.array(z.string().min(1)).min(1).describe("Task ids, of any split"),
    attempts: z.number().int().min(1).max(64).default(8),
    temperature: z.number().min(0).max(2).default(0.8).describe("The training temperature"),
    seed: Seed.default(0),
    ...rolloutLimits,
  })
  .strict();
export type CalibrationConfig = z.infer<typeof CalibrationConfig>;

export const CalibrationOutput = z.object({
  id: z.string(),
  tasks: z.array(z.object({ taskId: z.string(), category: z.string(), calibration: Calibration.nullable() })),
  environmentFailures: z.number().int(),
});
export type CalibrationOutput = z.infer<typeof CalibrationOutput>;

/** How far a job (an evaluation, a calibration) has got: rollouts done of all it runs. */
export const JobProgress = z.object({ done: z.number().int(), total: z.number().int() });
export type JobProgress = z.infer<typeof JobProgress>;

/** A job's answer to being started: what it checked it can run. */
export const JobAdmission = z.object({ rollouts: z.number().int() });
export type JobAdmission = z.infer<typeof JobAdmission>;

/** The gateway's view of a training run. */
export const RunView = z.object({
  name: z.string(),
  workflowId: z.string(),
  status: WorkflowStatus,
  uiUrl: z.string(),
  /** Null when the run is neither running nor completed, or when its worker did not answer in time. */
  progress: RunProgress.nullable(),
  /** Why a FAILED run failed (the workflow's error); null otherwise. */
  failure: z.string().nullable(),
});
export type RunView = z.infer<typeof RunView>;

/** The gateway's list of training runs, newest first. */
export const RunList = z.object({
  runs: z.array(
    z.object({
      name: z.string(),
      workflowId: z.string(),
      status: WorkflowStatus,
      startedAt: z.string(),
      uiUrl: z.string(),
    }),
  ),
});
export type RunList = z.infer<typeof RunList>;

/** Jobs of one kind (evaluations, calibrations), newest first. */
export const JobList = z.object({
  jobs: z.array(
    z.object({
      id: z.string(),
      workflowId: z.string(),
      status: WorkflowStatus,
      startedAt: z.string(),
      uiUrl: z.string(),
    }),
  ),
});
export type JobList = z.infer<typeof JobList>;

/** The gateway's view of a job: its status, progress while it runs, its output once done. */
export const jobView = <O extends z.ZodType>(output: O) =>
  z.object({
    id: z.string(),
    workflowId: z.string(),
    status: WorkflowStatus,
    uiUrl: z.string(),
    progress: JobProgress.nullable(),
    output: output.nullable(),
    failure: z.string().nullable(),
  });

/** One property of a harness's conformance check, and what was seen. */
export const HarnessCheckProperty = z.object({ name: z.string(), passed: z.boolean(), detail: z.string() });
export type HarnessCheckProperty = z.infer<typeof HarnessCheckProperty>;

/**
 * A pinned harness version's conformance check (`bridle harness check`), stored per (harness,
 * version): a training run refuses a version whose check failed.
 */
export const HarnessCheck = z.object({
  harness: z.string(),
  version: z.string(),
  checkedAt: z.string(),
  /** The context window the harness was told it has; null: the default a rollout gets. */
  contextWindow: z.number().int().nullable(),
  passed: z.boolean(),
  properties: z.array(HarnessCheckProperty),
  /** Whether every model call streamed, and whether each carried token usage. */
  streaming: z.boolean(),
  usage: z.boolean(),
  /** The solving session's model calls by how each joined its conversation. */
  stitching: z.object({
    "token-ids": z.number().int(),
    messages: z.number().int(),
    "new-branch": z.number().int(),
  }),
});
export type HarnessCheck = z.infer<typeof HarnessCheck>;
