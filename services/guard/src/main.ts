import { resolve } from "node:path";
import { createLogger, orExit } from "@bridle/service-kit";
import { createGuardApp } from "./app.ts";
import { CaptureStore } from "./capture.ts";
import { loadGuardEnv } from "./env.ts";
import { UpstreamClient } from "./proxy/upstream.ts";
import { createGuardServer, listen } from "./server.ts";

const env = orExit(loadGuardEnv);
const log = createLogger("guard", env.LOG_LEVEL);
const store = new CaptureStore(resolve(env.GUARD_DATA_DIR));
const sessions = await store.load();
log.info({ dataDir: store.dataDir, sessions, upstream: env.UPSTREAM_URL }, "sessions loaded");
const upstream = new UpstreamClient(env.UPSTREAM_URL, env.UPSTREAM_TIMEOUT_MS);
const deps = {
  store,
  capture: store,
  upstream,
  log,
  idleTimeoutMs: env.UPSTREAM_IDLE_TIMEOUT_MS,
  maxTokensCap: env.MAX_TOKENS_CAP,
};
const app = createGuardApp({
  ...deps,
  adminToken: env.GUARD_ADMIN_TOKEN,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
const server = createGuardServer(app, deps, log, env.BODY_LIMIT_BYTES);
listen(server, env.HOST, env.PORT, log, async () => {
  upstream.close();
  await store.close();
});
