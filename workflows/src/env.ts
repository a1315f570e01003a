import { BearerToken, loadEnv, TemporalEnv } from "@bridle/service-kit";
import { z } from "zod";

export const WorkerEnv = z.object({
  ...TemporalEnv.shape,
  SERVING_URL: z.string().url().default("http://127.0.0.1:8701"),
  TASKS_URL: z.string().url().default("http://127.0.0.1:8702"),
  GUARD_URL: z.string().url().default("http://127.0.0.1:8703"),
  GUARD_ADMIN_TOKEN: BearerToken("the guard's admin API is closed without it").describe(
    "The guard's admin token, to read the trajectories a training step trains on",
  ),
  RUNNER_URL: z.string().url().default("http://127.0.0.1:8704"),
  TRAINER_URL: z.string().url().default("http://127.0.0.1:8706"),
  WORKER_DATA_DIR: z.string().min(1).describe("Where evaluation reports are written"),
  WORKER_QUEUES: z
    .string()
    .default("control,rollout,training,serving")
    .transform((s) => s.split(",").map((q) => q.trim()))
    .pipe(z.array(z.enum(["control", "rollout", "training", "serving"])).min(1))
    .describe("Task queues this worker polls: a GPU node runs only training and serving"),
  ROLLOUT_SLOTS: z.coerce.number().int().min(1).max(256).default(4),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export const loadWorkerEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("worker", WorkerEnv, source);
