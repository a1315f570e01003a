import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TrainStepView } from "@bridle/contracts";
import { createLogger, repoRoot } from "@bridle/service-kit";
import { createTrainerApp } from "./app.ts";
import { TrainerWorker } from "./worker.ts";

/** The install folder tests use: BRIDLE_HOME when set (a shared install), else the repo's own. */
export const bridleHome = process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle");

/** A trainer app over a real worker process on the embedded model (CPU). */
export async function startTrainer() {
  const dataDir = mkdtempSync(join(tmpdir(), "bridle-trainer-"));
  const log = createLogger("trainer-test", "silent");
  const worker = new TrainerWorker({
    python: join(bridleHome, "venv", "bin", "python"),
    modelDir: join(bridleHome, "models", "smollm2-135m-instruct"),
    dataDir,
    device: "cpu",
    restartDelayMs: 100,
    log,
  });
  worker.start();
  await worker.ready();
  const app = createTrainerApp({ log, worker, dataDir });
  return { app, worker, dataDir };
}

type App = Awaited<ReturnType<typeof startTrainer>>["app"];

export async function postStep(app: App, body: unknown) {
  const response = await app.request("/v1/steps", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Polls a step until it leaves `running` (or `until` says stop), as an activity heartbeat would. */
export async function pollStep(
  app: App,
  run: string,
  step: number,
  until: (view: TrainStepView) => boolean = (v) => v.state !== "running",
): Promise<TrainStepView> {
  for (;;) {
    const response = await app.request(`/v1/steps/${run}/${step}`);
    const view = TrainStepView.parse(await response.json());
    if (until(view)) return view;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const PROMPT = [1, 504, 3575, 282, 4649, 314];

/** Two completions of one prompt in one group: the first rewarded, the second not. */
export function pairBatch(run: string, step: number, rewards: [number, number] = [1, 0], iterations = 2) {
  const calls = [
    [7042, 30, 198, 198],
    [1345, 2000, 42, 17],
  ];
  return {
    run,
    step,
    // Wide clipping: these fixed sampling logprobs are far from the model's own, and PPO clipping would
    // otherwise zero every gradient.
    config: { learningRate: 1e-3, iterations, clipEpsilon: 10 },
    trajectories: rewards.map((reward, i) => ({
      group: "g",
      reward,
      calls: [{ promptTokenIds: PROMPT, completionTokenIds: calls[i]!, logprobs: [-2, -2, -2, -2] }],
    })),
  };
}
