import type { EnvironmentImages } from "@bridle/sandbox";
import { createApp, type Logger } from "@bridle/service-kit";
import { taskRoutes } from "./routes/tasks.ts";
import type { TaskStore } from "./store.ts";

export interface TasksDeps {
  log: Logger;
  store: TaskStore;
  heldOutRatio: number;
  controlParallel: number;
  sandboxDir?: string | undefined;
  /** Variables of the user's environment that tasks' `${VAR}` references may read. */
  allowedEnv?: readonly string[];
  /** The verifier toolchain on this host, shown read-only to the tests. */
  toolchain?: string | undefined;
  /** Builds tasks' Dockerfiles at import (their sandboxes run on the images); none: bubblewrap on the host. */
  images?: EnvironmentImages | undefined;
  bodyLimitBytes?: number;
}

/** The tasks service: the registry of Harbor tasks, their controls and labels, and sampling. */
export function createTasksApp(deps: TasksDeps) {
  const app = createApp({
    name: "tasks",
    description:
      "Harbor task registry: import with controls, list, stratified sampling, agent and verifier views",
    log: deps.log,
    ...(deps.bodyLimitBytes ? { bodyLimitBytes: deps.bodyLimitBytes } : {}),
  });
  app.route("/v1", taskRoutes(deps));
  return app;
}

export { TaskStore } from "./store.ts";
