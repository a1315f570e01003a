import { createLogger, orExit, serveApp } from "@bridle/service-kit";
import { createRunnerApp } from "./app.ts";
import { loadRunnerEnv } from "./env.ts";

const env = orExit(loadRunnerEnv);
const log = createLogger("runner", env.LOG_LEVEL);
const app = createRunnerApp({
  log,
  tasksUrl: env.TASKS_URL,
  guardUrl: env.GUARD_URL,
  verifierUrl: env.VERIFIER_URL,
  dataDir: env.RUNNER_DATA_DIR,
  install: { npmRoot: env.HARNESS_NPM_ROOT, hermesVenv: env.HERMES_VENV },
  maxConcurrent: env.RUNNER_MAX_CONCURRENT,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log });
