import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@bridle/service-kit";
import { afterAll, expect, it } from "vitest";
import { createTrainerApp } from "./app.ts";
import { bridleHome, pairBatch, postStep } from "./test-support.ts";
import { TrainerWorker } from "./worker.ts";

const dataDir = mkdtempSync(join(tmpdir(), "bridle-trainer-bad-"));
const log = createLogger("trainer-test", "silent");
const worker = new TrainerWorker({
  python: join(bridleHome, "venv", "bin", "python"),
  modelDir: join(dataDir, "no-such-model"),
  dataDir,
  device: "cpu",
  restartDelayMs: 50,
  log,
});
afterAll(async () => {
  await worker.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

it("a worker that cannot load its model is restarted with backoff, and steps get retryable 503s", async () => {
  worker.start();
  const app = createTrainerApp({ log, worker, dataDir });
  while (worker.info.restarts < 2) await new Promise((r) => setTimeout(r, 200));
  expect(worker.info.state).toMatch(/restarting/);
  const { status, body } = await postStep(app, pairBatch("r", 1));
  expect(status).toBe(503);
  expect(body.error).toMatchObject({ code: "trainer_starting", retryable: true });
  const info = (await (await app.request("/v1/worker")).json()) as { restarts: number; device: null };
  expect(info.restarts).toBeGreaterThanOrEqual(2);
  expect(info.device).toBeNull();
});
