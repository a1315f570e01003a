import cluster from "node:cluster";
import { resolve } from "node:path";
import { createLogger, orExit } from "@bridle/service-kit";
import { createGuardApp } from "./app.ts";
import { CaptureStore, type GuardStore } from "./capture.ts";
import { runPrimary, WorkerStore } from "./cluster.ts";
import { loadGuardEnv } from "./env.ts";
import { EffectsCache } from "./proxy/judge.ts";
import { ModelRouter } from "./proxy/router.ts";
import { ServedModels } from "./proxy/served.ts";
import { createGuardServer, listen } from "./server.ts";

const env = orExit(loadGuardEnv);
const root = createLogger("guard", env.LOG_LEVEL);
const dataDir = resolve(env.GUARD_DATA_DIR);

if (env.GUARD_WORKERS > 1 && cluster.isPrimary) {
  // Owns sessions and captures; the workers serve (see cluster.ts).
  await runPrimary({ workers: env.GUARD_WORKERS, dataDir, log: root });
} else {
  const log = cluster.isWorker ? root.child({ worker: cluster.worker!.id }) : root;
  const store: GuardStore = cluster.isWorker
    ? new WorkerStore()
    : await CaptureStore.open(dataDir, log, { upstream: env.UPSTREAM_URL.join(",") });
  const upstream = new ModelRouter(env.UPSTREAM_URL, env.UPSTREAM_TIMEOUT_MS, log, env.SERVING_URL);
  const deps = {
    store,
    upstream,
    log,
    deadlines: { firstEventMs: env.UPSTREAM_FIRST_EVENT_TIMEOUT_MS, idleMs: env.UPSTREAM_IDLE_TIMEOUT_MS },
    maxTokensCap: env.MAX_TOKENS_CAP,
    served: env.SERVING_URL ? new ServedModels(env.SERVING_URL, log) : undefined,
    effects: env.GUARD_EFFECTS_CACHE > 0 ? new EffectsCache(env.GUARD_EFFECTS_CACHE) : undefined,
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
}
