import { join } from "node:path";
import { createLogger, orExit, ownUrl, serveApp } from "@bridle/service-kit";
import { AdapterManager } from "./adapters.ts";
import { createServingApp } from "./app.ts";
import { loadServingEnv } from "./env.ts";
import { ModelPool } from "./pool.ts";
import { AdapterRegistry } from "./registry.ts";

const env = orExit(loadServingEnv);
const log = createLogger("serving", env.LOG_LEVEL);
// The model servers fetch adapters from serving itself, at an address they can reach.
const pool = ModelPool.of(env.VLLM_URL, env.VLLM_TIMEOUT_MS, ownUrl(env.SERVING_URL, env.HOST, env.PORT));
const registry = new AdapterRegistry(env.SERVING_DATA_DIR);
const adapters = new AdapterManager(
  registry,
  pool,
  {
    maxLoras: env.SERVING_MAX_LORAS,
    maxLoraRank: env.SERVING_MAX_LORA_RANK,
    keepVersions: env.SERVING_KEEP_VERSIONS,
    monitorMs: env.SERVING_MONITOR_MS,
    liveCanaryMs: env.SERVING_LIVE_CANARY_MS,
    filesDir: join(env.SERVING_DATA_DIR, "adapters"),
  },
  log,
);
adapters.start();
const app = createServingApp({ log, pool, adapters, bodyLimitBytes: env.BODY_LIMIT_BYTES });
serveApp(app, {
  host: env.HOST,
  port: env.PORT,
  log,
  onShutdown: () => {
    adapters.stop();
    registry.close();
  },
});
