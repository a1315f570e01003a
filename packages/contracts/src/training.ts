import { z } from "zod";

/** A trainer run id: letters, digits, `.`, `_` and `-`; the step records live under it. */
export const RunId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "1-128 letters, digits, '.', '_' or '-'");

/** A seed: a non-negative 31-bit integer (what vLLM, torch and the sampler all take). */
export const Seed = z
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);

const TokenIds = z.array(z.number().int().nonnegative()).min(1);

/** One model call of a rollout, as the guard captured it. */
export const ModelCall = z
  .object({
    promptTokenIds: TokenIds,
    completionTokenIds: TokenIds,
    logprobs: z.array(z.number().max(0)).describe("Sampling logprob of each completion token"),
  })
  .superRefine((call, ctx) => {
    if (call.logprobs.length !== call.completionTokenIds.length) {
      ctx.addIssue({
        code: "custom",
        path: ["logprobs"],
        message: `has ${call.logprobs.length} entries for ${call.completionTokenIds.length} completion tokens`,
      });
    }
  });
export type ModelCall = z.infer<typeof ModelCall>;

/** One scored rollout. Advantages are computed per `group` (the rollouts of one task). */
export const ScoredTrajectory = z.object({
  group: z.string().min(1),
  reward: z.number(),
  calls: z.array(ModelCall).min(1),
});
export type ScoredTrajectory = z.infer<typeof ScoredTrajectory>;

/**
 * One scored rollout by reference: where its trajectory is read (the guard that recorded it, with
 * the session's read grant in the URL, so the reader needs no token), its group and its reward.
 */
export const TrajectoryRef = z
  .object({
    group: z.string().min(1),
    reward: z.number(),
    url: z
      .string()
      .url()
      .refine((u) => /^https?:/.test(u), "an http(s) URL")
      .describe("GET answers the Trajectory (the guard's /admin/sessions/{id}/trajectory?grant=...)"),
  })
  .strict();
export type TrajectoryRef = z.infer<typeof TrajectoryRef>;

/** The adapter version a step's samples must have been served by: null version for the base model. */
export const ServedVersion = z
  .object({ model: z.string().min(1), version: z.number().int().nullable() })
  .strict();
export type ServedVersion = z.infer<typeof ServedVersion>;

/** LoRA shape (fixed within a run) and GRPO settings. */
export const TrainConfig = z
  .object({
    rank: z.number().int().min(1).max(256).default(8),
    alpha: z.number().positive().default(16),
    targetModules: z
      .array(z.string().min(1))
      .min(1)
      .default(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    learningRate: z.number().positive().default(1e-5),
    clipEpsilon: z.number().positive().default(0.2),
    klCoef: z.number().nonnegative().default(0).describe("Weight of KL(policy || base); 0 turns it off"),
    scaleByStd: z.boolean().default(false).describe("Divide advantages by the group's standard deviation"),
    iterations: z.number().int().min(1).max(64).default(1).describe("Optimiser updates on this batch"),
    microBatchSize: z.number().int().min(1).max(1024).default(8),
    microBatchTokens: z
      .number()
      .int()
      .min(64)
      .default(2048)
      .describe(
        "Padded tokens per micro-batch; a longer sequence is a micro-batch of its own (logits are kept for the union of the rows' generated positions, so long rows are cheapest alone)",
      ),
    temperature: z
      .number()
      .positive()
      .max(2)
      .default(1)
      .describe(
        "The rollouts' sampling temperature: the trainer's logprobs use it, as the model server's did",
      ),
    measureKl: z
      .boolean()
      .default(true)
      .describe("Measure KL to the base model every step, even when klCoef is 0"),
    maxGradNorm: z.number().positive().default(1),
    seed: z.number().int().nonnegative().default(0).describe("Seeds the adapter's initialisation"),
  })
  .strict();
export type TrainConfig = z.infer<typeof TrainConfig>;

/** A committed trainer step, named by its run and number, and the hash its adapter must have. */
export const StepRef = z
  .object({
    run: RunId,
    step: z.number().int().min(1),
    hash: z.string().regex(/^[0-9a-f]{64}$/, "a sha256 in hex"),
  })
  .strict();
export type StepRef = z.infer<typeof StepRef>;

/** A step of a run: trained exactly once, from the state that step - 1 committed. */
export const TrainStepRequest = z
  .object({
    run: RunId,
    step: z.number().int().min(1),
    config: TrainConfig.default(TrainConfig.parse({})),
    parent: StepRef.optional().describe(
      "Step 1 only: the committed step (of another run, on this trainer) whose adapter the run starts from; absent, it starts fresh",
    ),
    trajectories: z
      .array(ScoredTrajectory)
      .optional()
      .describe(
        "The step's scored rollouts, given whole; with `samples` empty too, none was usable (every one an environment failure): the step is then a recorded no-op, so the run's next step follows it",
      ),
    samples: z
      .array(TrajectoryRef)
      .optional()
      .describe(
        "The step's scored rollouts by reference: the trainer reads each trajectory from its guard itself (a reader that cannot reach one fails the step as retryable), keeps the main branch's calls with token ids, and trains beside `trajectories`",
      ),
    served: ServedVersion.optional().describe(
      "With `samples`: the version every sample's calls must have been served by; a sample with a call not proven served by it is not trained on (counted in `refused`)",
    ),
  })
  .strict()
  .refine((r) => r.trajectories !== undefined || r.samples !== undefined, {
    path: ["trajectories"],
    message: "the batch is missing: give trajectories (whole) or samples (by reference), [] for none",
  });
export type TrainStepRequest = z.infer<typeof TrainStepRequest>;

/** The committed record of a step. Resubmitting the step returns it again (`replayed: true`). */
export const TrainStepResult = z.object({
  run: RunId,
  step: z.number().int(),
  applied: z.boolean().describe("False when the step changed nothing (see noopReason)"),
  noopReason: z
    .enum(["zero_advantage", "empty_batch"])
    .nullable()
    .describe("zero_advantage: every group's rewards were equal; empty_batch: no usable rollout"),
  adapterPath: z.string().describe("PEFT adapter directory, loadable by vLLM"),
  adapterHash: z.string().describe("sha256 over adapter_config.json and adapter_model.safetensors"),
  batchHash: z.string(),
  loss: z.number(),
  clipFraction: z.number(),
  kl: z.number().describe("Mean k3 estimate of KL(policy || base) over scored tokens, before the update"),
  logprobDiff: z
    .number()
    .nullable()
    .default(null)
    .describe("Mean |trainer logprob - sampling logprob| over scored tokens, before the update"),
  advantages: z.array(z.number()),
  completionTokens: z.number().int(),
  calls: z.number().int(),
  sequences: z
    .number()
    .int()
    .default(0)
    .describe("Training sequences: chains of calls that extend each other"),
  tokens: z.number().int().describe("Tokens processed by forward and backward passes"),
  iterations: z.number().int(),
  optimizerSteps: z.number().int().describe("Updates applied to this run in total, this step included"),
  tokensPerSecond: z.number(),
  elapsedMs: z.number().int(),
  device: z.string(),
  baseModel: z
    .string()
    .nullable()
    .default(null)
    .describe("The base model the adapter was trained on (its folder's name); null in older records"),
  parent: StepRef.nullable().default(null).describe("The step the run started from; null when fresh"),
  refused: z
    .number()
    .int()
    .default(0)
    .describe("Samples not trained on: a call in them was not proven served by the request's `served`"),
  completedAt: z.string(),
  replayed: z.boolean(),
});
export type TrainStepResult = z.infer<typeof TrainStepResult>;

export const StepProgress = z.object({
  phase: z.enum(["queued", "fetch", "train", "save"]),
  done: z.number().int(),
  total: z.number().int(),
});
export type StepProgress = z.infer<typeof StepProgress>;

/** What `GET /v1/steps/{run}/{step}` says: poll it for activity heartbeats. */
export const TrainStepView = z.discriminatedUnion("state", [
  z.object({ state: z.literal("running"), run: RunId, step: z.number().int(), progress: StepProgress }),
  z.object({ state: z.literal("done"), run: RunId, step: z.number().int(), result: TrainStepResult }),
  z.object({
    state: z.literal("failed"),
    run: RunId,
    step: z.number().int(),
    error: z.object({
      status: z.number().int(),
      code: z.string().describe("e.g. `worker_crashed` (retryable: resubmit to redo from the last commit)"),
      message: z.string(),
      retryable: z.boolean(),
    }),
  }),
]);
export type TrainStepView = z.infer<typeof TrainStepView>;

/** The trainer worker as its service sees it. */
export const TrainerWorkerInfo = z.object({
  state: z.enum(["starting", "ready", "busy", "restarting", "stopped"]),
  pid: z.number().int().nullable(),
  device: z.string().nullable(),
  vocabSize: z.number().int().nullable(),
  restarts: z.number().int(),
});
export type TrainerWorkerInfo = z.infer<typeof TrainerWorkerInfo>;
