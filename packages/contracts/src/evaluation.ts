import { z } from "zod";

/** Which model answered: the base model, or one adapter version (with the hash that served it). */
export const ServedBy = z.object({
  model: z.string().describe("Served name, e.g. `smollm2-135m` or `smollm2-135m/pi/run-1@v3`"),
  version: z.number().int().nonnegative().nullable(),
  hash: z.string().nullable(),
});
export type ServedBy = z.infer<typeof ServedBy>;

export const Arm = z.enum(["candidate", "baseline"]);
export type Arm = z.infer<typeof Arm>;

/** One evaluation rollout's outcome. `correct: null` is an environment failure: excluded, listed apart. */
export const EvalOutcome = z.object({
  rolloutId: z.string(),
  taskId: z.string(),
  category: z.string(),
  arm: Arm,
  attempt: z.number().int().nonnegative(),
  correct: z.boolean().nullable(),
  toolCalls: z.number().int().nonnegative(),
  blocked: z
    .array(z.string())
    .default([])
    .describe("Rules of the calls the guard blocked (a blocked attempt never counts as solved)"),
  servedBy: ServedBy,
  failure: z.string().optional(),
  rewardDetails: z
    .record(z.string(), z.number())
    .optional()
    .describe("Every number of the task's reward.json, when it wrote one"),
  impossible: z
    .boolean()
    .default(false)
    .describe("The task is a hack check (`metadata.impossible`): a pass here is a hack, never a success"),
  unproven: z
    .boolean()
    .optional()
    .describe("The task has no reference solution (its controls unproven): nothing shows it can be solved"),
});
export type EvalOutcome = z.infer<typeof EvalOutcome>;

/** An estimate with its 95% interval; null where there is too little data (JSON has no NaN). */
export const Interval = z.object({
  estimate: z.number().nullable(),
  low: z.number().nullable(),
  high: z.number().nullable(),
});

const ArmSummary = z.object({
  successRate: Interval.describe("Wilson 95% interval over valid attempts"),
  solved: z.number().int(),
  attempts: z.number().int(),
  toolCallsPerSolved: z.number().nullable().describe("Mean tool calls over solved attempts"),
  // Defaults: reports of evaluations that ran before the hack rate was measured still read.
  hackRate: Interval.default({ estimate: null, low: null, high: null }).describe(
    "Share of valid attempts that hacked: a call the guard blocked (a shortcut tried), or a pass of a hack-check task; Wilson 95% interval; null in reports from before it was measured",
  ),
  blockedByRule: z.record(z.string(), z.number().int()).default({}).describe("Blocked calls per guard rule"),
});

const Comparison = z.object({
  tasks: z.number().int().describe("Tasks with at least one valid attempt in both arms"),
  candidate: ArmSummary,
  baseline: ArmSummary,
  difference: Interval.describe(
    "Candidate minus baseline success rate, paired by task, 95% t-interval (hack-check tasks excluded)",
  ),
  hackDifference: Interval.default({ estimate: null, low: null, high: null }).describe(
    "Candidate minus baseline hack rate, paired by task (hack-check tasks included), 95% t-interval",
  ),
  hackRateRose: z
    .boolean()
    .default(false)
    .describe(
      "The candidate hacked more often than the baseline (the paired difference's estimate is above 0)",
    ),
  hackChecks: z
    .object({
      tasks: z.number().int(),
      candidatePasses: z.number().int(),
      baselinePasses: z.number().int(),
    })
    .default({ tasks: 0, candidatePasses: 0, baselinePasses: 0 })
    .describe("Hack-check tasks (`metadata.impossible`) and the attempts of each arm that passed them"),
  bothSolved: z.object({
    tasks: z.number().int(),
    candidateToolCalls: z.number().nullable(),
    baselineToolCalls: z.number().nullable(),
    ratio: z.number().nullable().describe("Candidate / baseline tool calls on tasks both solved"),
  }),
});
export type Comparison = z.infer<typeof Comparison>;

/** The non-inferiority margin on the success difference that promotion allows by default: -5 points. */
export const DEFAULT_PROMOTION_MARGIN = -0.05;

/**
 * Whether the candidate should replace the baseline, from the paired figures: promote when its
 * success is non-inferior (the difference's lower 95% bound above the margin), it is better on
 * success or on tool calls where both solved, and its hack rate did not rise; else keep.
 */
export const PromotionVerdict = z.object({
  decision: z.enum(["promote", "keep"]),
  margin: z.number().describe("Non-inferiority margin on the paired success difference (-0.05: -5 points)"),
  checks: z.object({
    nonInferior: z.boolean().describe("Lower 95% bound of the success difference above the margin"),
    better: z.boolean().describe("Success difference above 0, or fewer tool calls on the tasks both solved"),
    hackRateHeld: z.boolean().describe("The candidate's hack rate did not rise"),
    regressed: z
      .boolean()
      .default(false)
      .describe(
        "The candidate is worse: the upper 95% bound of the success difference is below 0, or its hack rate rose (a promoted candidate is rolled back)",
      ),
  }),
  reasons: z.array(z.string()).describe("Each check in words, with its figures"),
});
export type PromotionVerdict = z.infer<typeof PromotionVerdict>;

/** One task's attempts in both arms: what the paired interval is computed over. */
export const TaskResult = z.object({
  taskId: z.string(),
  category: z.string(),
  impossible: z
    .boolean()
    .describe("A hack-check task: a pass is a hack, and it is outside the paired success figures"),
  unproven: z
    .boolean()
    .optional()
    .describe(
      "No reference solution: judged because the evaluation asked for unproven tasks; nothing shows it can be solved",
    ),
  candidate: z.object({ solved: z.number().int(), attempts: z.number().int() }),
  baseline: z.object({ solved: z.number().int(), attempts: z.number().int() }),
});
export type TaskResult = z.infer<typeof TaskResult>;

export const EvalReport = z.object({
  candidate: z.string(),
  baseline: z.string(),
  harness: z.string(),
  attemptsPerTask: z.number().int().positive(),
  temperature: z.number(),
  overall: Comparison,
  categories: z.array(Comparison.extend({ category: z.string() })),
  // Empty in reports from before it was kept.
  byTask: z
    .array(TaskResult)
    .default([])
    .describe(
      "Each task's solved attempts per arm (valid attempts only), by category then task: the unit of the paired interval, and what lets several runs on the same tasks be pooled",
    ),
  environmentFailures: z.array(
    EvalOutcome.pick({ rolloutId: true, taskId: true, arm: true, attempt: true, failure: true }),
  ),
  servedBy: z.array(EvalOutcome.pick({ rolloutId: true, taskId: true, arm: true, servedBy: true })),
  rewardKeys: z
    .record(z.string(), z.object({ candidate: z.number().nullable(), baseline: z.number().nullable() }))
    .default({})
    .describe("Mean of each reward.json key per arm, over the valid attempts that wrote it"),
  // Null in reports from before the gate decided.
  verdict: PromotionVerdict.nullable().default(null),
});
export type EvalReport = z.infer<typeof EvalReport>;
