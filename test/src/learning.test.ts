import {
  AdapterVersion,
  CompletionResult,
  ScoreResult,
  TrainConfig,
  TrainerWorkerInfo,
  type TrainStepRequest,
  TrainStepView,
} from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { beforeAll, describe, expect, it } from "vitest";
import { config } from "./helpers.ts";

// The real stack from global-setup (vLLM on the CPU, serving, the trainer worker).
const serving = `http://${config.host}:${config.ports.serving}`;
const trainer = `http://${config.host}:${config.ports.trainer}`;
const ADAPTER = "smollm2/e2e/learn";

beforeAll(async () => {
  for (;;) {
    const worker = await callJson(`${trainer}/v1/worker`, { schema: TrainerWorkerInfo });
    if (worker.state === "ready") break;
    await new Promise((r) => setTimeout(r, 500));
  }
}, 300_000);

const sample = (seed: number) =>
  callJson(`${serving}/v1/completions`, {
    schema: CompletionResult,
    body: { prompt: "Name a colour of the sea:", maxTokens: 8, temperature: 1, seed },
  });
const score = (model: string, c: CompletionResult) =>
  callJson(`${serving}/v1/score`, {
    schema: ScoreResult,
    body: { model, promptTokenIds: c.promptTokenIds, completionTokenIds: c.completionTokenIds },
  });

async function trainStep(request: TrainStepRequest) {
  await callJson(`${trainer}/v1/steps`, { schema: TrainStepView, body: request });
  for (;;) {
    const view = await callJson(`${trainer}/v1/steps/${request.run}/${request.step}`, {
      schema: TrainStepView,
    });
    if (view.state === "done") return view.result;
    if (view.state === "failed") throw new Error(`step failed: ${view.error.message}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("a GRPO step learns, measured through vLLM serving the new version", () => {
  it("raises the rewarded completion's log-probability relative to the unrewarded one", async () => {
    const good = await sample(1);
    let bad = await sample(2);
    for (let seed = 3; bad.completionTokenIds.join() === good.completionTokenIds.join(); seed++)
      bad = await sample(seed);

    const result = await trainStep({
      run: "e2e-learn",
      step: 1,
      // Large enough that the adapter's effect stands clear of bf16 serving's rounding everywhere:
      // at 2e-3 the serving canary's prompt (unrelated to this one) sometimes read exactly the base.
      config: TrainConfig.parse({ learningRate: 1e-2, iterations: 2 }),
      trajectories: [good, bad].map((c, i) => ({
        group: "sea",
        reward: i === 0 ? 1 : 0,
        calls: [
          {
            promptTokenIds: c.promptTokenIds,
            completionTokenIds: c.completionTokenIds,
            logprobs: c.logprobs,
          },
        ],
      })),
    });
    expect(result).toMatchObject({ applied: true, optimizerSteps: 2, device: "cpu" });

    await callJson(`${serving}/v1/adapters/${ADAPTER}/versions`, {
      schema: AdapterVersion,
      body: { path: result.adapterPath, step: result.step, version: 1 },
    });
    const loaded = await callJson(`${serving}/v1/adapters/${ADAPTER}/versions/1?wait=true`, {
      schema: AdapterVersion,
      timeoutMs: 90_000,
    });
    expect(loaded).toMatchObject({ servedName: `${ADAPTER}@v1`, state: "serving", hash: result.adapterHash });

    const base = { good: await score(config.modelName, good), bad: await score(config.modelName, bad) };
    const tuned = { good: await score(ADAPTER, good), bad: await score(ADAPTER, bad) };
    expect(tuned.good.adapter).toMatchObject({ servedName: `${ADAPTER}@v1`, hash: result.adapterHash });
    const rise = tuned.good.sum - base.good.sum - (tuned.bad.sum - base.bad.sum);
    console.info(
      { base: [base.good.sum, base.bad.sum], tuned: [tuned.good.sum, tuned.bad.sum], rise },
      "learning",
    );
    expect(rise).toBeGreaterThan(0.05);
  });
});
