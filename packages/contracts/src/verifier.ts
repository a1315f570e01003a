import { z } from "zod";
import { ArtifactRef } from "./artifacts.ts";
import { RewardConfig, RewardMode } from "./reward.ts";
import { TaskId } from "./tasks.ts";

/** Why the verifier produced no reward: an environment failure, which is null and never 0. */
export const VerifierFailure = z.enum(["timeout", "crashed", "no_reward", "bad_reward", "setup"]);
export type VerifierFailure = z.infer<typeof VerifierFailure>;

/** What running `tests/test.sh` in the sandbox produced. */
export const VerifierOutcome = z.object({
  /** The score read from reward.txt or reward.json; null on an environment failure. */
  correctness: z.number().min(0).max(1).nullable(),
  failure: VerifierFailure.nullable(),
  message: z.string(),
  exitCode: z.number().int().nullable(),
  durationMs: z.number().nonnegative(),
  /** The last few KB of the test script's output, for debugging a task. */
  outputTail: z.string(),
  /** Every number in reward.json, when the task wrote one. */
  details: z.record(z.string(), z.number()).optional(),
});
export type VerifierOutcome = z.infer<typeof VerifierOutcome>;

/** Verify a finished agent phase: the workspace it left, by reference. */
export const VerificationRequest = z
  .object({
    taskId: TaskId,
    workspace: ArtifactRef.describe(
      "The workspace the agent phase left, packed as a tar by the runner and served by it",
    ),
    changes: ArtifactRef.optional().describe(
      "On a task's image: what the agent phase changed outside the workspace (the sandbox's overlay layer), packed the same way",
    ),
    step: z
      .string()
      .min(1)
      .optional()
      .describe("A multi-step task's step whose tests to run (each step is verified after its agent phase)"),
    calls: z.number().int().min(0).default(0),
    blocked: z.boolean().default(false),
    mode: RewardMode.default("train"),
    reward: RewardConfig.partial().optional().describe("Overrides of the service's w and budget"),
  })
  .strict();
export type VerificationRequest = z.infer<typeof VerificationRequest>;

export const VerificationResult = z.object({
  taskId: TaskId,
  hash: z.string(),
  outcome: VerifierOutcome,
  /** The training signal; null means exclude this rollout from the batch. */
  reward: z.number().nullable(),
});
export type VerificationResult = z.infer<typeof VerificationResult>;
