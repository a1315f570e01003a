import { createApp, type Logger } from "@bridle/service-kit";
import type { AdapterManager } from "./adapters.ts";
import { adapterRoutes } from "./routes/adapters.ts";
import { lineageRoutes } from "./routes/lineages.ts";
import { modelRoutes } from "./routes/models.ts";
import type { VllmClient } from "./vllm.ts";

export interface ServingDeps {
  log: Logger;
  vllm: VllmClient;
  adapters: AdapterManager;
  bodyLimitBytes?: number;
}

/** The serving service: Bridle's one door to the model server and its LoRA adapters. */
export function createServingApp(deps: ServingDeps) {
  const app = createApp({
    name: "serving",
    description: "The model server (vLLM) and its LoRA adapters",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  app.route("/v1", modelRoutes(deps.vllm, deps.adapters));
  app.route("/v1", adapterRoutes(deps.adapters));
  app.route("/v1", lineageRoutes(deps.adapters));
  return app;
}
