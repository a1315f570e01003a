import type { SandboxHost } from "@bridle/harbor";
import { createApp, type Logger } from "@bridle/service-kit";
import { taskRoutes } from "./routes/tasks.ts";
import type { TaskStore } from "./store.ts";

export interface TasksDeps extends SandboxHost {
  log: Logger;
  store: TaskStore;
  heldOutRatio: number;
  controlParallel: number;
  bodyLimitBytes?: number;
}

/** The tasks service: the registry of Harbor tasks, their controls and labels, and sampling. */
export function createTasksApp(deps: TasksDeps) {
  const app = createApp({
    name: "tasks",
    description:
      "Harbor task registry: import with controls, list, stratified sampling, agent and verifier views",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  app.route("/v1", taskRoutes(deps));
  return app;
}

export { TaskStore } from "./store.ts";
