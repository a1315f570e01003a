import { z } from "zod";

/** The reward recipe's knobs: bonus weight `w` and call budget `B`. */
export const RewardConfig = z.object({
  w: z.number().min(0).default(0.1),
  budget: z.number().positive().default(15),
});
export type RewardConfig = z.infer<typeof RewardConfig>;

/** Training gets the efficiency bonus; evaluation never does. */
export const RewardMode = z.enum(["train", "eval"]);
export type RewardMode = z.infer<typeof RewardMode>;

/** What the reward function needs to know about one rollout. */
export const RewardInput = z.object({
  /** The verifier's score in [0, 1]; null when the verifier never produced one. */
  correctness: z.number().min(0).max(1).nullable(),
  /** Tool calls the harness made. */
  calls: z.number().int().min(0),
  /** Whether the guard blocked any call in the rollout. */
  blocked: z.boolean().default(false),
  mode: RewardMode.default("train"),
});
export type RewardInput = z.infer<typeof RewardInput>;
