import { join } from "node:path";
import { EnvironmentImages } from "@bridle/sandbox";
import { ArtifactStore, artifactBucket, createLogger, orExit, ownUrl, serveApp } from "@bridle/service-kit";
import { createTasksApp } from "./app.ts";
import { loadTasksEnv } from "./env.ts";
import { TaskStore } from "./store.ts";

const env = orExit(loadTasksEnv);
const log = createLogger("tasks", env.LOG_LEVEL);
const store = new TaskStore(env.TASKS_DATA);
const self = ownUrl(env.TASKS_URL, env.HOST, env.PORT);
const app = createTasksApp({
  log,
  store,
  heldOutRatio: env.TASKS_HELDOUT_RATIO,
  controlParallel: env.TASKS_CONTROL_PARALLEL,
  sandboxDir: env.TASKS_SANDBOX_DIR,
  allowedEnv: env.TASK_ENV_ALLOW,
  toolchain: env.VERIFIER_TOOLCHAIN,
  images: env.IMAGES_HOME
    ? new EnvironmentImages({ home: env.IMAGES_HOME, say: (line) => log.info(line) })
    : undefined,
  harnessChecksDir: env.HARNESS_CHECKS_DIR,
  // Images built here, packed for runners and verifiers on hosts that have not built them.
  artifacts: new ArtifactStore(
    join(env.TASKS_DATA, "artifacts"),
    `${self}/v1/artifacts`,
    orExit(() => artifactBucket(env, "tasks")),
  ),
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log, onShutdown: () => store.close() });
