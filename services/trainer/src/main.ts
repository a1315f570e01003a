import { createLogger, orExit, serveApp } from "@bridle/service-kit";
import { createTrainerApp } from "./app.ts";
import { loadTrainerEnv } from "./env.ts";
import { TrainerWorker } from "./worker.ts";

const env = orExit(loadTrainerEnv);
const log = createLogger("trainer", env.LOG_LEVEL);
const worker = new TrainerWorker({
  python: env.TRAINER_PYTHON,
  modelDir: env.TRAINER_MODEL_DIR,
  dataDir: env.TRAINER_DATA_DIR,
  device: env.TRAINER_DEVICE,
  precision: env.TRAINER_PRECISION,
  restartDelayMs: env.TRAINER_RESTART_DELAY_MS,
  log,
});
worker.start();
const app = createTrainerApp({
  log,
  worker,
  dataDir: env.TRAINER_DATA_DIR,
  bodyLimitBytes: env.BODY_LIMIT_BYTES,
});
serveApp(app, { host: env.HOST, port: env.PORT, log, onShutdown: () => worker.stop() });
