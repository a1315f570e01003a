import { join } from "node:path";
import { BaseEnv, loadEnv, Port, repoRoot, UrlList } from "@bridle/service-kit";
import { z } from "zod";

export const ServingEnv = BaseEnv.extend({
  PORT: Port.default(8701),
  VLLM_URL: UrlList("http://127.0.0.1:8000").describe(
    "The model server, or a pool of them as comma-separated URLs: vLLM nodes serving one base model, each given every adapter version",
  ),
  SERVING_URL: z
    .string()
    .url()
    .optional()
    .describe(
      "Serving's address as the model servers reach it: they load each adapter from <this>/v1/adapter-files/<hash>, so none needs serving's disk; unset: http://HOST:PORT",
    ),
  VLLM_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  SERVING_DATA_DIR: z
    .string()
    .min(1)
    .default(join(repoRoot, ".bridle", "data", "serving"))
    .describe("Holds the adapter registry (SQLite) and the adapters fetched by reference"),
  SERVING_MAX_LORAS: z.coerce
    .number()
    .int()
    .min(1)
    .default(4)
    .describe("vLLM's --max-loras: versions loaded at once"),
  SERVING_MAX_LORA_RANK: z.coerce.number().int().min(1).default(16).describe("vLLM's --max-lora-rank"),
  SERVING_KEEP_VERSIONS: z.coerce
    .number()
    .int()
    .min(1)
    .default(2)
    .describe("Serving versions kept per adapter (the newest, plus older ones for in-flight rollouts)"),
  SERVING_MONITOR_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(2_000)
    .describe("How often the model server's adapter list is checked (a restart loses adapters)"),
  SERVING_LIVE_CANARY_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(600_000)
    .describe(
      "How often every serving version is proven again against the base model on the canary prompt (0: never); a version served as the base model is failed and unloaded",
    ),
});
export type ServingEnv = z.infer<typeof ServingEnv>;

export const loadServingEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("serving", ServingEnv, source);
