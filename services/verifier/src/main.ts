import { tmpdir } from "node:os";
import { imagesFromTasks } from "@bridle/harbor";
import { EnvironmentImages, Sandbox } from "@bridle/sandbox";
import { createLogger, orExit, serveApp } from "@bridle/service-kit";
import { createVerifierApp } from "./app.ts";
import { loadVerifierEnv } from "./env.ts";

const env = orExit(loadVerifierEnv);
const log = createLogger("verifier", env.LOG_LEVEL);
// A verifier killed mid-check took its sandboxes' processes with it; what they left goes now.
await Sandbox.reapOrphans(env.VERIFIER_SANDBOX_DIR ?? tmpdir(), log);
const app = createVerifierApp({
  log,
  tasksUrl: env.TASKS_URL,
  concurrency: env.VERIFIER_CONCURRENCY,
  reward: { w: env.REWARD_W, budget: env.REWARD_BUDGET },
  memoryMb: env.VERIFIER_MEMORY_MB,
  sandboxDir: env.VERIFIER_SANDBOX_DIR,
  allowedEnv: env.TASK_ENV_ALLOW,
  toolchain: env.VERIFIER_TOOLCHAIN,
  // Images built by the tasks service are fetched from it when this host has not built them.
  images: env.IMAGES_HOME
    ? new EnvironmentImages({ home: env.IMAGES_HOME, source: imagesFromTasks(env.TASKS_URL) })
    : undefined,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log });
