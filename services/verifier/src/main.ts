import { createLogger, orExit, serveApp } from "@bridle/service-kit";
import { createVerifierApp } from "./app.ts";
import { loadVerifierEnv } from "./env.ts";

const env = orExit(loadVerifierEnv);
const log = createLogger("verifier", env.LOG_LEVEL);
const app = createVerifierApp({
  log,
  tasksUrl: env.TASKS_URL,
  concurrency: env.VERIFIER_CONCURRENCY,
  reward: { w: env.REWARD_W, budget: env.REWARD_BUDGET },
  memoryMb: env.VERIFIER_MEMORY_MB,
  sandboxDir: env.VERIFIER_SANDBOX_DIR,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log });
