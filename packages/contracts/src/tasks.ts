import { z } from "zod";
import { TaskPlugins } from "./guard.ts";
import { Seed } from "./training.ts";

/** Bridle's own task families: the bundled suite's four, which reports and held-out strata know. */
export const KNOWN_CATEGORIES = ["build", "repair", "extend", "qa"] as const;

/**
 * A task's category: one of Bridle's four families, or the category an imported task names itself
 * (Harbor's `metadata.category` is free-form, e.g. `software-engineering`), normalised to a
 * lowercase name; `uncategorized` when the task names none. Samplers and reports group by it.
 */
export const TaskCategory = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,63}$/, "a lowercase name such as build or software-engineering");
export type TaskCategory = z.infer<typeof TaskCategory>;

/** Harbor's free-form category as Bridle names it: lowercase, runs of other characters as `-`. */
export function categoryName(raw: string | undefined | null): TaskCategory {
  const name = (raw ?? "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 64)
    .replace(/-+$/, "");
  return name === "" ? "uncategorized" : name;
}

/** Training tasks may be sampled for rollouts; held-out tasks are for evaluation only. */
export const TaskSplit = z.enum(["train", "held-out"]);
export type TaskSplit = z.infer<typeof TaskSplit>;

/** A task id: the name of its folder, a lowercase slug. */
export const TaskId = z
  .string()
  .min(1)
  .max(128)
  .regex(
    /^[a-z0-9][a-z0-9._-]*$/,
    "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
  );
export type TaskId = z.infer<typeof TaskId>;

/** Repo2RLEnv's evaluation status of a task. */
export const EvaluationStatus = z.enum(["unverified", "verified", "needs_repair", "blocked"]);
export type EvaluationStatus = z.infer<typeof EvaluationStatus>;

/** Repo2RLEnv's pipeline stage a task last reached. */
export const EvaluationStage = z.enum([
  "generation",
  "bootstrap",
  "construction",
  "review",
  "controls",
  "probes",
  "rollout",
  "repair",
  "complete",
  "unknown",
]);
export type EvaluationStage = z.infer<typeof EvaluationStage>;

/** Evaluation labels as Repo2RLEnv records them under `[metadata.repo2env.evaluation]`. */
export const EvaluationLabels = z.object({
  status: EvaluationStatus,
  stage: EvaluationStage,
  reasonCodes: z.array(z.string()).default([]),
  provenance: z.string().optional(),
  evidence: z.string().optional(),
});
export type EvaluationLabels = z.infer<typeof EvaluationLabels>;

/** One control run: the oracle (reference solution, must score 1) or nop (nothing done, must score 0). */
export const ControlRun = z.object({
  control: z.enum(["oracle", "nop"]),
  expected: z.number(),
  /** The verifier's reward; null when the verifier never produced one (environment failure). */
  reward: z.number().nullable(),
  passed: z.boolean(),
  message: z.string().describe("`ok`, or what went wrong"),
  durationMs: z.number().nonnegative(),
  attempt: z.number().int().positive().default(1).describe("Which run of this control (1-based)"),
});
export type ControlRun = z.infer<typeof ControlRun>;

/** Our own controls for one content hash of a task. */
export const ControlResults = z.object({
  passed: z.boolean().describe("Every run scored as expected, and no control's reward varied"),
  hash: z.string(),
  checkedAt: z.string(),
  repeats: z.number().int().positive().default(1).describe("Runs of each control"),
  flaky: z
    .array(z.enum(["oracle", "nop"]))
    .default([])
    .describe("Controls whose verifier gave different rewards on identical runs"),
  unproven: z
    .boolean()
    .default(false)
    .describe(
      "Not passed only because the oracle could not run: the task has no reference solution, and its nop control passed",
    ),
  runs: z.array(ControlRun),
});
export type ControlResults = z.infer<typeof ControlResults>;

/**
 * A task's measured base success: k rollouts of one model in one harness at one temperature.
 * Tells the curriculum which tasks give a group of rollouts different rewards (a learning signal).
 */
export const Calibration = z.object({
  model: z.string().min(1),
  harness: z.string().min(1),
  temperature: z.number().min(0).max(2),
  attempts: z.number().int().positive().describe("Valid attempts (environment failures excluded)"),
  successes: z.number().int().nonnegative(),
  successRate: z.number().min(0).max(1),
  meanCorrectness: z.number().min(0).max(1).describe("Mean verifier score (partial credit counts)"),
  toolCallsPerSolved: z.number().nullable(),
  taskHash: z.string().describe("The task content it was measured on"),
  measuredAt: z.string(),
});
export type Calibration = z.infer<typeof Calibration>;

/** A task as the registry lists it. */
export const TaskSummary = z.object({
  id: TaskId,
  hash: z.string().describe("sha256 over every file of the task folder"),
  category: TaskCategory,
  split: TaskSplit,
  splitSource: z.enum(["hash", "metadata"]).describe("Whether the split came from the id hash or metadata"),
  tier: z.string().nullable().describe("`metadata.tier` of task.toml: a named group of tasks, if any"),
  impossible: z
    .boolean()
    .default(false)
    .describe(
      "`metadata.impossible`: a hack check whose tests no honest solution passes (any pass is a hack)",
    ),
  labels: EvaluationLabels.nullable().describe("Labels as recorded in task.toml, if any"),
  controls: ControlResults.nullable().describe("Results of our own controls; null when never run"),
  calibrations: z
    .array(Calibration)
    .default([])
    .describe("Measured base success, one per (model, harness), for the task's current content"),
  agentTimeoutSec: z.number().positive(),
  verifierTimeoutSec: z.number().positive(),
  requires: z.array(z.string()),
  importedAt: z.string(),
});
export type TaskSummary = z.infer<typeof TaskSummary>;

/** Filters for listing tasks. */
export const TaskListQuery = z.object({
  category: TaskCategory.optional(),
  split: TaskSplit.optional(),
  tier: z.string().min(1).optional(),
  controls: z.enum(["passed", "failed", "unchecked"]).optional(),
  status: EvaluationStatus.optional(),
});
export type TaskListQuery = z.infer<typeof TaskListQuery>;

/** A file carried over HTTP: a relative path, its mode and base64 content. */
export const TaskFile = z.object({
  path: z.string().min(1),
  mode: z.number().int().min(0).max(0o7777),
  base64: z.string(),
});
export type TaskFile = z.infer<typeof TaskFile>;

/** Where a task's workspace is shown and its agent and tests start (task.toml or WORKDIR; /app by default). */
const Workdir = z
  .string()
  .regex(/^\/[A-Za-z0-9._/-]*$/, "an absolute path")
  .default("/app")
  .describe("Where the workspace is shown inside the sandbox, and where the agent and the tests start");

/**
 * A task's environment image, built from its Dockerfile on the host of the tasks service (and of the
 * runner and verifier, which find it by digest): its sandboxes run on it. Null: bubblewrap on the host.
 */
export const TaskImageRef = z
  .object({
    digest: z.string().regex(/^[0-9a-f]{64}$/, "a sha256 hex digest"),
    tag: z.string(),
  })
  .nullable()
  .default(null)
  .describe("The image built from the task's Dockerfile, when this host builds images");
export type TaskImageRef = z.infer<typeof TaskImageRef>;

/**
 * A service beside a task's container (another service of its compose file: a web server, an MCP
 * server), built on the tasks service's host like the task's image. The runner and the verifier
 * start it, on a network shared with the task's sandbox alone, before the agent or the tests run.
 */
export const TaskServiceRef = z.object({
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, "a host name")
    .describe("The service's name, by which the task's container reaches it"),
  image: z.object({ digest: z.string().regex(/^[0-9a-f]{64}$/, "a sha256 hex digest"), tag: z.string() }),
  command: z
    .array(z.string())
    .nullable()
    .default(null)
    .describe("What it runs (compose's command); null: its image's CMD"),
  env: z.record(z.string(), z.string()).default({}),
  healthcheck: z
    .array(z.string())
    .nullable()
    .default(null)
    .describe("A command that exits 0 once it is ready (compose's healthcheck); null: ready once it listens"),
  memoryMb: z
    .number()
    .int()
    .positive()
    .nullable()
    .default(null)
    .describe("Its memory limit in MiB (compose's deploy limits or mem_limit); null: the sandbox's default"),
  cpus: z.number().positive().nullable().default(null).describe("Its CPU limit; null: none"),
});
export type TaskServiceRef = z.infer<typeof TaskServiceRef>;

const TaskServices = z
  .array(TaskServiceRef)
  .default([])
  .describe("Services beside the task's container, started in order on a network of its own");

/**
 * An MCP server the task offers its agent (Harbor's `[[environment.mcp_servers]]`): the runner
 * writes it into the harness's own configuration. Over HTTP it is usually one of the task's
 * services, reached by name; over stdio the harness starts `command` in the task's sandbox.
 */
export const McpServer = z.discriminatedUnion("transport", [
  z.object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/, "letters, digits, '_' and '-'"),
    transport: z.enum(["streamable-http", "sse"]),
    url: z.string().url(),
  }),
  z.object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/, "letters, digits, '_' and '-'"),
    transport: z.literal("stdio"),
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
  }),
]);
export type McpServer = z.infer<typeof McpServer>;

/**
 * A reward threshold a step must reach for the next one to run (Harbor's `min_reward`): per key of
 * the step's reward; a bare number in task.toml is the `reward` key's.
 */
export const MinReward = z.record(z.string(), z.number());
export type MinReward = z.infer<typeof MinReward>;

/** How a multi-step task's step rewards roll up: their mean (Harbor's default), or the last one's. */
export const StepRewardStrategy = z.enum(["mean", "final"]);
export type StepRewardStrategy = z.infer<typeof StepRewardStrategy>;

/** One step of a multi-step task, as its agent phase sees it: never its tests or solution. */
export const AgentStep = z.object({
  name: z.string().min(1),
  instruction: z.string(),
  agentTimeoutSec: z.number().positive(),
  workdir: z
    .array(TaskFile)
    .default([])
    .describe("steps/<name>/workdir/: merged into the workspace before the step; its setup.sh runs then"),
  minReward: MinReward.nullable().default(null),
});
export type AgentStep = z.infer<typeof AgentStep>;

/** One step's tests: the task's shared tests/ with the step's own tests/ over them. */
export const VerifierStep = z.object({
  name: z.string().min(1),
  verifierTimeoutSec: z.number().positive(),
  verifierEnv: z.record(z.string(), z.string()),
  tests: z.array(TaskFile),
});
export type VerifierStep = z.infer<typeof VerifierStep>;

/** What the agent phase gets: the instruction and the workspace files, never tests or solution. */
/** A user of a task's image: a name or uid of its /etc/passwd; null for root. */
const TaskUser = z
  .union([z.string().min(1), z.number().int().min(0)])
  .nullable()
  .default(null);

export const AgentTask = z.object({
  id: TaskId,
  hash: z.string(),
  category: TaskCategory,
  instruction: z.string(),
  agentTimeoutSec: z.number().positive(),
  workdir: Workdir,
  image: TaskImageRef,
  services: TaskServices,
  mcpServers: z
    .array(McpServer)
    .default([])
    .describe("MCP servers the harness is told about (task.toml [[environment.mcp_servers]])"),
  environment: z.array(TaskFile),
  guard: z
    .object({ allowedHosts: z.array(z.string()), plugins: TaskPlugins })
    .default({ allowedHosts: [], plugins: { answer_paths: [], protected_paths: [], rules: [] } })
    .describe("The task's own guard rules (task.toml [guard]), for the runner's guard sessions"),
  env: z
    .record(z.string(), z.string())
    .default({})
    .describe(
      "Variables the agent phase sees (task.toml [environment.env] with [agent.env] over it), as written: references to variables are resolved by the runner",
    ),
  steps: z
    .array(AgentStep)
    .default([])
    .describe("A multi-step task's steps, run in order in one sandbox; empty for a single-step task"),
  stepRewards: StepRewardStrategy.default("mean"),
  user: TaskUser.describe(
    "Who the agent runs as on the task's image (task.toml [agent] user); root when null",
  ),
});
export type AgentTask = z.infer<typeof AgentTask>;

/** What the verifier gets: the tests and how long they may run. Internal: never shown to an agent. */
export const VerifierBundle = z.object({
  id: TaskId,
  hash: z.string(),
  category: TaskCategory,
  verifierTimeoutSec: z.number().positive(),
  verifierEnv: z.record(z.string(), z.string()),
  rewardKey: z
    .string()
    .nullable()
    .default(null)
    .describe("The key of a several-key reward.json that is the reward (task.toml verifier.reward_key)"),
  workdir: Workdir,
  image: TaskImageRef,
  services: TaskServices,
  tests: z.array(TaskFile),
  steps: z.array(VerifierStep).default([]).describe("A multi-step task's tests, per step"),
  user: TaskUser.describe(
    "Who the tests run as on the task's image (task.toml [verifier] user); root when null",
  ),
});
export type VerifierBundle = z.infer<typeof VerifierBundle>;

/** Import Harbor task folders from a path on the tasks service's host. */
export const ImportRequest = z
  .object({
    path: z.string().min(1).describe("A task folder, or a folder of task folders"),
    runControls: z.boolean().default(true),
    controlRepeats: z
      .number()
      .int()
      .min(1)
      .max(10)
      .default(2)
      .describe("Runs of each control; a verifier whose reward differs between them is flagged as flaky"),
  })
  .strict();
export type ImportRequest = z.infer<typeof ImportRequest>;

/** The outcome for one folder of an import or a validation. */
export const TaskVerdict = z.object({
  id: z.string(),
  dir: z.string(),
  ok: z.boolean(),
  /** `ok`, or every problem found, each naming its file and field or control. */
  problems: z.array(z.string()),
  /** What the task's reader should know that is no reason to refuse it (unknown keys, a free category). */
  notes: z.array(z.string()).default([]),
  imported: z.boolean(),
  controls: ControlResults.nullable(),
  /** The controls are those this same content passed before (see `checkedAt`), not run again. */
  controlsReused: z.boolean().default(false),
  labels: EvaluationLabels.nullable(),
  image: TaskImageRef,
  services: TaskServices,
});
export type TaskVerdict = z.infer<typeof TaskVerdict>;

export const ImportResult = z.object({ verdicts: z.array(TaskVerdict) });
export type ImportResult = z.infer<typeof ImportResult>;

/**
 * A stratified batch request. Sampling is deterministic in (seed, cursor): the eligible tasks are
 * ordered once per epoch, and successive cursors walk that order without replacement.
 */
export const SampleRequest = z
  .object({
    size: z.number().int().min(1).max(1_000),
    seed: Seed,
    cursor: z.number().int().min(0).default(0).describe("Position in the seeded sequence; pass nextCursor"),
    split: TaskSplit.default("train"),
    categories: z.array(TaskCategory).min(1).optional(),
    ids: z.array(TaskId).min(1).optional().describe("Sample only these tasks (each must be eligible)"),
    unproven: z
      .boolean()
      .default(false)
      .describe(
        "Also sample tasks whose controls are unproven: no reference solution, the nop control passed",
      ),
  })
  .strict();
export type SampleRequest = z.infer<typeof SampleRequest>;

export const SampleResult = z.object({
  tasks: z.array(z.object({ id: TaskId, category: TaskCategory, hash: z.string(), epoch: z.number().int() })),
  nextCursor: z.number().int(),
  epochSize: z.number().int().describe("Eligible tasks per epoch"),
});
export type SampleResult = z.infer<typeof SampleResult>;
