import { BaseEnv, BearerToken, loadEnv, Port, UrlList } from "@bridle/service-kit";
import { z } from "zod";

export const GuardEnv = BaseEnv.extend({
  PORT: Port.default(8703),
  UPSTREAM_URL: UrlList("http://127.0.0.1:8000").describe(
    "The OpenAI-compatible model server, or several as comma-separated URLs; with SERVING_URL the guard follows serving's map of its pool instead",
  ),
  GUARD_DATA_DIR: z
    .string()
    .min(1)
    .default("guard-data")
    .describe("Sessions and captures (JSONL per session)"),
  GUARD_ADMIN_TOKEN: BearerToken(
    "the admin API (sessions, trajectories) is closed by default, since a sandbox reaches this port (bridle up keeps one in <BRIDLE_HOME>/guard-admin-token)",
  ).describe("Bearer token every /admin route needs; the guard does not start without one"),
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(600_000),
  UPSTREAM_IDLE_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .positive()
    .default(120_000)
    .describe("A stream that sends nothing this long after its first event is ended with an error"),
  UPSTREAM_FIRST_EVENT_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .positive()
    .default(600_000)
    .describe(
      "How long a stream may wait for its first event: the model server computes the whole prompt first, " +
        "minutes on a CPU for a harness's system prompt and tools, longer behind other rollouts' prompts " +
        "(UPSTREAM_TIMEOUT_MS, the longest silence of the connection, bounds it too)",
    ),
  GUARD_WORKERS: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(1)
    .describe(
      "Processes serving the proxy on one port; above 1, a primary process owns sessions and captures. " +
        "One core carries about 1,000 fast answers/s or 12,000-18,000 streamed tokens/s",
    ),
  SERVING_URL: z
    .string()
    .url()
    .optional()
    .describe(
      "The serving service, whose registry names the adapter version and weight digest behind each captured call; unset: calls carry no such proof",
    ),
  GUARD_EFFECTS_CACHE: z.coerce
    .number()
    .int()
    .min(0)
    .default(4096)
    .describe(
      "Tool calls whose parsed arguments and effects are kept for when the same call comes again (0: parse every call)",
    ),
  MAX_TOKENS_CAP: z.coerce
    .number()
    .int()
    .positive()
    .optional()
    .describe("Clamp for the harness's max_tokens"),
});
export type GuardEnv = z.infer<typeof GuardEnv>;

export const loadGuardEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("guard", GuardEnv, source);
