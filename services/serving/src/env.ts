import { BaseEnv, loadEnv } from "@bridle/service-kit";
import { z } from "zod";

export const ServingEnv = BaseEnv.extend({
  PORT: z.coerce.number().int().min(1).max(65_535).default(8701),
  VLLM_URL: z.string().url().default("http://127.0.0.1:8000"),
  VLLM_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
});
export type ServingEnv = z.infer<typeof ServingEnv>;

export const loadServingEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("serving", ServingEnv, source);
