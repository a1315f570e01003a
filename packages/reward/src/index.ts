/**
 * The reward function. Pure and free of Node built-ins, so Temporal workflow code may import it.
 */
import type { RewardConfig, RewardInput } from "@bridle/contracts";

/** The recipe's defaults: a correct run with `budget` calls earns `1 + w/2`. */
export const defaultRewardConfig: RewardConfig = { w: 0.1, budget: 15 };

/** Scores at or above this count as correct for the efficiency bonus (guards float noise). */
const CORRECT = 1 - 1e-9;

/**
 * The reward of one rollout:
 * - a blocked call scores 0, whatever the verifier said (cheating is the agent's doing, so it is
 *   punished even when the verifier also failed);
 * - an environment failure (`correctness` null) is null: exclude it from the batch, never score 0;
 * - in training, a fully correct rollout with calls > 0 earns `1 + w*B/(B + calls)`;
 * - otherwise (partial credit, wrong, no calls, or evaluation) the reward is the correctness.
 */
export function computeReward(
  input: Pick<RewardInput, "correctness" | "calls"> & Partial<Pick<RewardInput, "blocked" | "mode">>,
  config: RewardConfig = defaultRewardConfig,
): number | null {
  if (input.blocked) return 0;
  const { correctness, calls } = input;
  if (correctness === null) return null;
  if (!Number.isFinite(correctness) || correctness < 0 || correctness > 1) {
    throw new RangeError(`correctness must be a number in [0, 1], got ${correctness}`);
  }
  if (!Number.isInteger(calls) || calls < 0) {
    throw new RangeError(`calls must be a non-negative integer, got ${calls}`);
  }
  if ((input.mode ?? "train") === "eval" || correctness < CORRECT || calls === 0) return correctness;
  return correctness * (1 + (config.w * config.budget) / (config.budget + calls));
}
