import { createApp, type Logger } from "@bridle/service-kit";
import type { AdapterManager } from "./adapters.ts";
import type { ModelPool } from "./pool.ts";
import { adapterRoutes } from "./routes/adapters.ts";
import { lineageRoutes } from "./routes/lineages.ts";
import { modelRoutes } from "./routes/models.ts";

export interface ServingDeps {
  log: Logger;
  pool: ModelPool;
  adapters: AdapterManager;
  bodyLimitBytes?: number;
}

/** The serving service: Bridle's one door to the model server and its LoRA adapters. */
export function createServingApp(deps: ServingDeps) {
  const app = createApp({
    name: "serving",
    description: "The model servers (vLLM, one or a pool) and their LoRA adapters",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  app.route("/v1", modelRoutes(deps.pool, deps.adapters));
  app.route("/v1", adapterRoutes(deps.adapters));
  app.route("/v1", lineageRoutes(deps.adapters));
  return app;
}
