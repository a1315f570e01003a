import { BaseEnv, BearerToken, loadEnv, Port, TemporalEnv } from "@bridle/service-kit";
import { z } from "zod";

export const GatewayEnv = BaseEnv.extend({
  PORT: Port.default(8700),
  ...TemporalEnv.shape,
  TEMPORAL_UI_URL: z.string().url().default("http://127.0.0.1:8233"),
  SERVING_URL: z.string().url().default("http://127.0.0.1:8701"),
  TRAINER_URL: z.string().url().default("http://127.0.0.1:8706"),
  BRIDLE_API_TOKEN: BearerToken(
    "the API is closed by default (bridle up keeps one in <BRIDLE_HOME>/api-token)",
  ).describe("Bearer token required on every /v1 route; the gateway does not start without one"),
});
export type GatewayEnv = z.infer<typeof GatewayEnv>;

export const loadGatewayEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("gateway", GatewayEnv, source);
