import { createApp, type Logger } from "@bridle/service-kit";
import { RunMetrics } from "./metrics.ts";
import { metricsRoutes } from "./routes/metrics.ts";
import { stepRoutes } from "./routes/steps.ts";
import { workerRoutes } from "./routes/worker.ts";
import { TrainingSteps } from "./steps.ts";
import type { TrainerWorker } from "./worker.ts";

export interface TrainerDeps {
  log: Logger;
  worker: TrainerWorker;
  dataDir: string;
  bodyLimitBytes?: number;
}

/** The trainer service: GRPO steps on a resident Python worker, exactly once per (run, step). */
export function createTrainerApp(deps: TrainerDeps) {
  const app = createApp({
    name: "trainer",
    description: "GRPO steps on LoRA adapters, exactly once per (run, step)",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  const steps = new TrainingSteps(deps.worker, deps.dataDir, deps.log);
  app.route("/v1", stepRoutes(steps, deps.worker));
  app.route("/v1", workerRoutes(deps.worker));
  app.route("/v1", metricsRoutes(new RunMetrics(deps.dataDir)));
  return app;
}
