import { TemporalNamespace } from "@bridle/contracts";
import { loadEnv } from "@bridle/service-kit";
import { z } from "zod";

export const WorkerEnv = z.object({
  TEMPORAL_ADDRESS: z.string().default("127.0.0.1:7233"),
  TEMPORAL_NAMESPACE: z.string().default(TemporalNamespace),
  SERVING_URL: z.string().url().default("http://127.0.0.1:8701"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export const loadWorkerEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("worker", WorkerEnv, source);
