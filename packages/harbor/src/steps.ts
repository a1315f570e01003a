import type { MinReward, StepRewardStrategy } from "@bridle/contracts";

/** What one step's tests gave: its reward, and every number of its reward.json. */
export interface StepScore {
  correctness: number;
  details?: Record<string, number> | undefined;
}

/**
 * Why a step's reward stops the task (below its `min_reward` on some key), or null to go on. The
 * step's rewards are its reward.json's numbers with `reward` as the step's reward when the file has
 * no key of that name; a key the step did not write counts as below any threshold.
 */
export function belowMinReward(score: StepScore, minReward: MinReward | null): string | null {
  if (!minReward) return null;
  const rewards: Record<string, number> = { reward: score.correctness, ...(score.details ?? {}) };
  for (const [key, threshold] of Object.entries(minReward)) {
    const actual = rewards[key];
    if (actual === undefined) return `${key}: not written, below min_reward ${threshold}`;
    if (actual < threshold) return `${key} = ${actual}, below min_reward ${threshold}`;
  }
  return null;
}

/**
 * The task's reward from the steps that ran (a step below its threshold ends the task, so later
 * steps never run): their mean (Harbor's default), or the last step's. Null when no step ran.
 */
export function rollUpSteps(scores: number[], strategy: StepRewardStrategy): number | null {
  if (scores.length === 0) return null;
  if (strategy === "final") return scores[scores.length - 1] ?? null;
  return scores.reduce((a, b) => a + b, 0) / scores.length;
}
