import { createLogger, orExit, serveApp } from "@bridle/service-kit";
import { createServingApp } from "./app.ts";
import { loadServingEnv } from "./env.ts";
import { VllmClient } from "./vllm.ts";

const env = orExit(loadServingEnv);
const log = createLogger("serving", env.LOG_LEVEL);
const app = createServingApp({
  log,
  vllm: new VllmClient(env.VLLM_URL, env.VLLM_TIMEOUT_MS),
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log });
