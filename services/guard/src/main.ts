import { resolve } from "node:path";
import { createLogger, orExit, serveApp } from "@bridle/service-kit";
import { createGuardApp } from "./app.ts";
import { CaptureStore } from "./capture.ts";
import { loadGuardEnv } from "./env.ts";
import { UpstreamClient } from "./proxy/upstream.ts";

const env = orExit(loadGuardEnv);
const log = createLogger("guard", env.LOG_LEVEL);
const store = new CaptureStore(resolve(env.GUARD_DATA_DIR));
const sessions = await store.load();
log.info({ dataDir: store.dataDir, sessions, upstream: env.UPSTREAM_URL }, "sessions loaded");
const upstream = new UpstreamClient(env.UPSTREAM_URL, env.UPSTREAM_TIMEOUT_MS);
const app = createGuardApp({
  log,
  store,
  upstream,
  idleTimeoutMs: env.UPSTREAM_IDLE_TIMEOUT_MS,
  adminToken: env.GUARD_ADMIN_TOKEN,
  maxTokensCap: env.MAX_TOKENS_CAP,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log, onShutdown: () => upstream.close() });
