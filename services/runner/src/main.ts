import { join } from "node:path";
import { imagesFromTasks } from "@bridle/harbor";
import { EnvironmentImages, Sandbox } from "@bridle/sandbox";
import { ArtifactStore, artifactBucket, createLogger, orExit, ownUrl, serveApp } from "@bridle/service-kit";
import { createRunnerApp } from "./app.ts";
import { loadRunnerEnv } from "./env.ts";

const env = orExit(loadRunnerEnv);
const log = createLogger("runner", env.LOG_LEVEL);
// A runner killed mid-rollout took its sandboxes' processes with it; what they left goes now.
await Sandbox.reapOrphans(join(env.RUNNER_DATA_DIR, "sandboxes"), log);
const self = ownUrl(env.RUNNER_URL, env.HOST, env.PORT);
const app = createRunnerApp({
  log,
  artifacts: new ArtifactStore(
    join(env.RUNNER_DATA_DIR, "artifacts"),
    `${self}/v1/artifacts`,
    orExit(() => artifactBucket(env, "runner")),
  ),
  tasksUrl: env.TASKS_URL,
  guardUrl: env.GUARD_URL,
  guardAdminToken: env.GUARD_ADMIN_TOKEN,
  verifierUrl: env.VERIFIER_URL,
  dataDir: env.RUNNER_DATA_DIR,
  install: { npmRoot: env.HARNESS_NPM_ROOT, hermesVenv: env.HERMES_VENV },
  // Images built by the tasks service are fetched from it when this host has not built them.
  images: env.IMAGES_HOME
    ? new EnvironmentImages({ home: env.IMAGES_HOME, source: imagesFromTasks(env.TASKS_URL) })
    : undefined,
  allowedEnv: env.TASK_ENV_ALLOW,
  maxConcurrent: env.RUNNER_MAX_CONCURRENT,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log });
