import { createApp, type Logger, MIN_TOKEN_LENGTH, requireBearer } from "@bridle/service-kit";
import type { Client } from "@temporalio/client";
import { adapterRoutes, lineageRoutes } from "./routes/adapters.ts";
import { calibrationRoutes, evalRoutes } from "./routes/evals.ts";
import { probeRoutes } from "./routes/probes.ts";
import { runRoutes } from "./routes/runs.ts";
import { dashboardRoutes } from "./routes/ui.ts";

export interface GatewayDeps {
  log: Logger;
  temporal: Client;
  namespace: string;
  uiUrl: string;
  servingUrl: string;
  trainerUrl: string;
  /** Required on every /v1 route: the control plane is closed by default. */
  apiToken: string;
  bodyLimitBytes?: number;
}

/**
 * The gateway: Bridle's public HTTP API, and the dashboard page that reads it (`/ui/`). It starts
 * and reads workflows; it reads serving's adapters and lineages and the trainer's run metrics:
 * every change goes through a workflow.
 */
export function createGatewayApp(deps: GatewayDeps) {
  const app = createApp({
    name: "gateway",
    description: "Bridle's public API: training runs, evaluations, adapters",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  if (deps.apiToken.length < MIN_TOKEN_LENGTH)
    throw new Error(`the gateway's API token must have at least ${MIN_TOKEN_LENGTH} characters`);
  app.use(
    "/v1/*",
    requireBearer(deps.apiToken, "missing or wrong bearer token (Authorization: Bearer <BRIDLE_API_TOKEN>)"),
  );
  // Chained, so the app's type carries every route: the CLI's client is typed from it.
  return app
    .route("/v1/probes", probeRoutes(deps))
    .route("/v1/runs", runRoutes(deps))
    .route("/v1/evals", evalRoutes(deps))
    .route("/v1/calibrations", calibrationRoutes(deps))
    .route("/v1/adapters", adapterRoutes(deps))
    .route("/v1/lineages", lineageRoutes(deps))
    .route("/", dashboardRoutes());
}

/** The gateway's routes as a type, for a typed client (`hc<GatewayApp>` from `hono/client`). */
export type GatewayApp = ReturnType<typeof createGatewayApp>;
