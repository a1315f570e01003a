import type { SandboxHost } from "@bridle/harbor";
import { type ArtifactStore, createApp, type Logger } from "@bridle/service-kit";
import { harnessCheckRoutes } from "./routes/harness-checks.ts";
import { imageRoutes } from "./routes/images.ts";
import { taskRoutes } from "./routes/tasks.ts";
import type { TaskStore } from "./store.ts";

export interface TasksDeps extends SandboxHost {
  log: Logger;
  store: TaskStore;
  heldOutRatio: number;
  controlParallel: number;
  /** Where `bridle harness check` stores harness versions' checks, served to every runner. */
  harnessChecksDir?: string | undefined;
  /** Where packed images are held for hosts that fetch them; none: images stay on this host. */
  artifacts?: ArtifactStore | undefined;
  bodyLimitBytes?: number;
}

/** The tasks service: the registry of Harbor tasks, their controls and labels, and sampling. */
export function createTasksApp(deps: TasksDeps) {
  const app = createApp({
    name: "tasks",
    description:
      "Harbor task registry: import with controls, list, stratified sampling, agent and verifier views; the task images built here and the harness versions' conformance checks",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  app.route("/v1", taskRoutes(deps));
  app.route("/v1", harnessCheckRoutes(deps.harnessChecksDir));
  if (deps.artifacts) app.route("/v1", imageRoutes(deps.images, deps.artifacts));
  return app;
}

export { TaskStore } from "./store.ts";
