import { ArtifactsEnv, BaseEnv, EnvNames, loadEnv, Port } from "@bridle/service-kit";
import { z } from "zod";

export const TasksEnv = BaseEnv.extend({
  ...ArtifactsEnv.shape,
  PORT: Port.default(8702),
  TASKS_DATA: z.string().min(1).describe("Folder of the registry's SQLite file"),
  TASKS_URL: z
    .string()
    .url()
    .optional()
    .describe(
      "Where runners and verifiers reach this service, for the images they fetch by reference; unset: http://HOST:PORT",
    ),
  HARNESS_CHECKS_DIR: z
    .string()
    .optional()
    .describe(
      "Stored conformance checks (`bridle harness check`), one per harness version, served to the runners: a training rollout of a version whose check failed is refused",
    ),
  TASKS_HELDOUT_RATIO: z.coerce.number().min(0).max(1).default(0.2),
  TASKS_CONTROL_PARALLEL: z.coerce.number().int().min(1).max(16).default(2),
  TASKS_SANDBOX_DIR: z
    .string()
    .optional()
    .describe("Where control sandboxes are made; the temp folder if unset"),
  VERIFIER_TOOLCHAIN: z
    .string()
    .optional()
    .describe("The verifier toolchain (pytest and the plugins Harbor tasks pin), shown to tests read-only"),
  IMAGES_HOME: z
    .string()
    .optional()
    .describe(
      "Where tasks' Dockerfiles are built and their images unpacked (podman's storage); unset: tasks run in bubblewrap on the host",
    ),
  TASK_ENV_ALLOW: EnvNames.describe("Variables that the $VAR references of tasks may read, comma-separated"),
});
export type TasksEnv = z.infer<typeof TasksEnv>;

export const loadTasksEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("tasks", TasksEnv, source);
