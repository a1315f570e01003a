import { z } from "zod";
import { Seed } from "./training.ts";

const Id = z
  .string()
  .min(1)
  .max(120)
  .regex(/^[A-Za-z0-9._:@/-]+$/, "letters, digits and . _ : @ / - only");

/** Run one harness on one task, through the guard, in a sandbox, then verify. */
export const RolloutRequest = z
  .object({
    rolloutId: Id.optional().describe("Idempotency key; generated when absent"),
    taskId: Id,
    harness: z.string().min(1).describe("pi, opencode, hermes or claude-code"),
    model: z.string().min(1).describe("Served model or adapter name the guard routes every call to"),
    capture: z.boolean().default(true).describe("Record token ids and logprobs for training"),
    guardMode: z.enum(["block", "log"]).default("block"),
    rewardMode: z.enum(["train", "eval"]).default("train"),
    maxTurns: z
      .number()
      .int()
      .min(1)
      .max(200)
      .default(17)
      .describe("Model calls the rollout may make: the guard ends the harness's loop after this many"),
    contextWindow: z
      .number()
      .int()
      .min(1_024)
      .max(1_048_576)
      .default(32_768)
      .describe("The served model's context, as told to the harness (OpenCode's prompt alone is ~30 KB)"),
    agentTimeoutSec: z
      .number()
      .positive()
      .max(24 * 3600)
      .optional()
      .describe("Defaults to the task's"),
    temperature: z
      .number()
      .min(0)
      .max(2)
      .optional()
      .describe("Sampling temperature the guard enforces on every model call; absent: the harness's own"),
    seed: Seed.optional().describe(
      "Sampling seed of the rollout's calls (with a temperature); absent: unseeded",
    ),
    labels: z.record(z.string(), z.string()).default({}),
  })
  .strict();
export type RolloutRequest = z.infer<typeof RolloutRequest>;

/** Where a rollout's environment failed; such a rollout is excluded, never scored 0. */
export const FailureStage = z.enum(["task", "guard", "sandbox", "harness", "verifier"]);
export type FailureStage = z.infer<typeof FailureStage>;

export const RolloutResult = z.object({
  rolloutId: z.string(),
  taskId: z.string(),
  harness: z.string(),
  model: z.string(),
  /** The verifier's score in [0, 1]; null on an environment failure. */
  correctness: z.number().min(0).max(1).nullable(),
  /** The reward (bonus in training only); null means exclude from the batch. */
  reward: z.number().nullable(),
  rewardDetails: z
    .record(z.string(), z.number())
    .optional()
    .describe("Every number of the task's reward.json, when it wrote one (Harbor's several-key rewards)"),
  steps: z
    .array(
      z.object({
        name: z.string(),
        correctness: z.number(),
        reward: z.number().nullable(),
        toolCalls: z.number().int().nonnegative(),
        message: z.string(),
      }),
    )
    .optional()
    .describe("A multi-step task's steps as they ran (a step below its min_reward ends the run)"),
  toolCalls: z.object({
    guard: z
      .number()
      .int()
      .nonnegative()
      .describe("Calls the harness received, counted by the guard: the reward's count"),
    harness: z.number().int().nonnegative().describe("Calls the harness reports having executed"),
  }),
  toolCallFormats: z
    .record(z.string(), z.number().int())
    .default({})
    .describe("Parsed tool calls by the format the model wrote them in; `unparsed`: call-like text"),
  stitching: z
    .record(z.string(), z.number().int())
    .default({})
    .describe("Model calls by how each joined its conversation: `token-ids`, `messages` or `new-branch`"),
  blocked: z.array(z.object({ rule: z.string().optional(), notice: z.string() })),
  stopReason: z.string(),
  finalAnswer: z.string().nullable(),
  environmentFailure: z.object({ stage: FailureStage, reason: z.string() }).nullable(),
  failedAfterBlock: z
    .object({ stage: FailureStage, reason: z.string() })
    .nullable()
    .default(null)
    .describe("What failed after a blocked call: a rollout with a violation scores 0 whatever happens next"),
  durationsMs: z.object({ harness: z.number(), verifier: z.number(), total: z.number() }),
  servedModels: z.array(z.string()).describe("Model names the upstream answered with"),
  refs: z.object({
    guardSession: z
      .string()
      .nullable()
      .describe("The guard session of the rollout (of a multi-step task: of its last step that ran)"),
    stepSessions: z
      .array(z.string())
      .optional()
      .describe("A multi-step task's guard sessions, one per step that ran, in order"),
    trajectory: z.string().nullable().describe("URL of the captured trajectory"),
    logs: z.string().describe("Folder with the harness's output"),
  }),
});
export type RolloutResult = z.infer<typeof RolloutResult>;

/**
 * A submitted rollout as its poller sees it (`GET /v1/rollouts/{id}/state`): running, done with
 * its result, or failed with the error its blocking request would have answered.
 */
export const RolloutState = z.discriminatedUnion("state", [
  z.object({
    state: z.literal("running"),
    rolloutId: z.string(),
    elapsedMs: z.number().int().describe("Since the runner took it (queued for a slot included)"),
  }),
  z.object({ state: z.literal("done"), rolloutId: z.string(), result: RolloutResult }),
  z.object({
    state: z.literal("failed"),
    rolloutId: z.string(),
    error: z.object({
      status: z.number().int(),
      code: z.string().describe("e.g. `rollout_cancelled`, `service_unavailable` (retryable)"),
      message: z.string(),
      retryable: z.boolean(),
    }),
  }),
]);
export type RolloutState = z.infer<typeof RolloutState>;
