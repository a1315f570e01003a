import { createApp, httpError, type Logger } from "@bridle/service-kit";
import type { Client } from "@temporalio/client";
import { probeRoutes } from "./routes/probes.ts";

export interface GatewayDeps {
  log: Logger;
  temporal: Client;
  namespace: string;
  uiUrl: string;
  apiToken?: string | undefined;
  bodyLimitBytes?: number;
}

/** The gateway: Bridle's public HTTP API. It starts and reads workflows; it never calls services. */
export function createGatewayApp(deps: GatewayDeps) {
  const app = createApp({
    name: "gateway",
    description: "Bridle's public API: training runs, evaluations, adapters",
    log: deps.log,
    ...(deps.bodyLimitBytes ? { bodyLimitBytes: deps.bodyLimitBytes } : {}),
  });
  if (deps.apiToken) {
    const expected = `Bearer ${deps.apiToken}`;
    app.use("/v1/*", async (c, next) => {
      if (c.req.header("authorization") !== expected) {
        throw httpError(
          401,
          "unauthorized",
          "missing or wrong bearer token (Authorization: Bearer <BRIDLE_API_TOKEN>)",
        );
      }
      await next();
    });
  }
  app.route("/v1/probes", probeRoutes(deps));
  return app;
}
