import { createLogger, orExit, serveApp, temporalConnection } from "@bridle/service-kit";
import { Client, Connection } from "@temporalio/client";
import { createGatewayApp } from "./app.ts";
import { loadGatewayEnv } from "./env.ts";

const env = orExit(loadGatewayEnv);
const log = createLogger("gateway", env.LOG_LEVEL);
// Lazy: the gateway starts (and answers /healthz) even while Temporal is still coming up.
const connection = Connection.lazy(orExit(() => temporalConnection(env)));
const temporal = new Client({ connection, namespace: env.TEMPORAL_NAMESPACE });
const app = createGatewayApp({
  log,
  temporal,
  namespace: env.TEMPORAL_NAMESPACE,
  uiUrl: env.TEMPORAL_UI_URL,
  servingUrl: env.SERVING_URL,
  trainerUrl: env.TRAINER_URL,
  apiToken: env.BRIDLE_API_TOKEN,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log, onShutdown: () => connection.close() });
