import { ArtifactsEnv, BaseEnv, BearerToken, EnvNames, loadEnv, Port } from "@bridle/service-kit";
import { z } from "zod";

export const RunnerEnv = BaseEnv.extend({
  ...ArtifactsEnv.shape,
  PORT: Port.default(8704),
  TASKS_URL: z.string().url().default("http://127.0.0.1:8702"),
  GUARD_URL: z.string().url().default("http://127.0.0.1:8703"),
  VERIFIER_URL: z.string().url().default("http://127.0.0.1:8705"),
  GUARD_ADMIN_TOKEN: BearerToken("the guard's admin API is closed without it").describe(
    "The guard's admin token, to register sessions and read trajectories (never given to a sandbox)",
  ),
  RUNNER_DATA_DIR: z.string().min(1).describe("Sandboxes while they run, and each rollout's logs and result"),
  HARNESS_NPM_ROOT: z.string().min(1).describe("node_modules of the pinned npm harnesses"),
  HERMES_VENV: z.string().min(1).describe("Hermes' virtual environment"),
  IMAGES_HOME: z
    .string()
    .optional()
    .describe(
      "Where tasks' images are unpacked (the tasks service builds them); tasks with an image fail without it",
    ),
  RUNNER_URL: z
    .string()
    .url()
    .optional()
    .describe(
      "Where the verifier reaches this runner, for the workspaces it hands over by reference; unset: http://HOST:PORT",
    ),
  RUNNER_MAX_CONCURRENT: z.coerce.number().int().min(1).max(64).default(4),
  TASK_ENV_ALLOW: EnvNames.describe("Variables that the $VAR references of tasks may read, comma-separated"),
});
export type RunnerEnv = z.infer<typeof RunnerEnv>;

export const loadRunnerEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("runner", RunnerEnv, source);
