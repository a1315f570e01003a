import { BaseEnv, EnvNames, loadEnv, Port } from "@bridle/service-kit";
import { z } from "zod";

export const VerifierEnv = BaseEnv.extend({
  PORT: Port.default(8705),
  TASKS_URL: z.string().url().default("http://127.0.0.1:8702"),
  VERIFIER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2).describe("Sandboxes at once"),
  VERIFIER_MEMORY_MB: z.coerce.number().int().min(16).default(2048),
  VERIFIER_SANDBOX_DIR: z.string().optional().describe("Where sandboxes are made; the temp folder if unset"),
  REWARD_W: z.coerce.number().min(0).default(0.1),
  REWARD_BUDGET: z.coerce.number().positive().default(15),
  IMAGES_HOME: z
    .string()
    .optional()
    .describe(
      "Where tasks' Dockerfiles are built and their images unpacked (podman's storage); unset: tasks run in bubblewrap on the host",
    ),
  VERIFIER_TOOLCHAIN: z
    .string()
    .optional()
    .describe("The verifier toolchain (pytest and the plugins Harbor tasks pin), shown to tests read-only"),
  TASK_ENV_ALLOW: EnvNames.describe("Variables that the $VAR references of tasks may read, comma-separated"),
});
export type VerifierEnv = z.infer<typeof VerifierEnv>;

export const loadVerifierEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("verifier", VerifierEnv, source);
