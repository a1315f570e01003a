import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import type { TrainStepView } from "@bridle/contracts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_WORKER_DEATHS } from "./steps.ts";
import { pairBatch, pollStep, postStep, startTrainer } from "./test-support.ts";

type Done = Extract<TrainStepView, { state: "done" }>;
let t: Awaited<ReturnType<typeof startTrainer>>;

beforeAll(async () => {
  t = await startTrainer();
});
afterAll(async () => {
  await t.worker.stop();
  rmSync(t.dataDir, { recursive: true, force: true });
});

describe("bad batches get clear 4xx errors", () => {
  const issuesOf = (body: Record<string, unknown>) =>
    ((body.error as { issues?: { path: string; message: string }[] }).issues ?? []).map((i) => i.path);

  it("names a token id outside the vocabulary", async () => {
    const batch = pairBatch("bad", 1);
    batch.trajectories[0]!.calls[0]!.completionTokenIds[2] = 49_152;
    const { status, body } = await postStep(t.app, batch);
    expect(status).toBe(400);
    expect(issuesOf(body)).toEqual(["body.trajectories.0.calls.0.completionTokenIds.2"]);
  });

  it("names mismatched lengths", async () => {
    const batch = pairBatch("bad", 1);
    batch.trajectories[1]!.calls[0]!.logprobs = [-1];
    const { status, body } = await postStep(t.app, batch);
    expect(status).toBe(400);
    expect(issuesOf(body)).toContain("body.trajectories.1.calls.0.logprobs");
  });

  it("refuses a batch without trajectories", async () => {
    const { trajectories: _, ...missing } = pairBatch("bad", 1);
    const { status, body } = await postStep(t.app, missing);
    expect(status).toBe(400);
    expect(issuesOf(body)).toEqual(["body.trajectories"]);
  });

  it("refuses NaN logprobs, whether sent raw or as null", async () => {
    const raw = JSON.stringify(pairBatch("bad", 1)).replace("-2,", "NaN,");
    const sentRaw = await postStep(t.app, raw);
    expect(sentRaw.status).toBe(400);
    expect((sentRaw.body.error as { message: string }).message).toMatch(/NaN and Infinity/);
    const batch = pairBatch("bad", 1) as { trajectories: { calls: { logprobs: (number | null)[] }[] }[] };
    batch.trajectories[0]!.calls[0]!.logprobs[1] = null;
    const asNull = await postStep(t.app, batch);
    expect(asNull.status).toBe(400);
    expect(issuesOf(asNull.body)).toEqual(["body.trajectories.0.calls.0.logprobs.1"]);
  });

  it("refuses a step whose predecessor never completed", async () => {
    const { status, body } = await postStep(t.app, pairBatch("bad", 3));
    expect(status).toBe(409);
    expect((body.error as { code: string }).code).toBe("previous_step_missing");
  });
});

describe("exactly once per (run, step)", () => {
  it("treats all-equal rewards as a reported no-op", async () => {
    expect((await postStep(t.app, pairBatch("flat", 1, [0.5, 0.5]))).status).toBe(202);
    const view = (await pollStep(t.app, "flat", 1)) as Done;
    expect(view.state).toBe("done");
    expect(view.result).toMatchObject({ applied: false, noopReason: "zero_advantage", optimizerSteps: 0 });
  });

  it("records a step with no usable rollout as a no-op, so the run's next step follows it", async () => {
    expect((await postStep(t.app, { ...pairBatch("flat", 2), trajectories: [] })).status).toBe(202);
    const view = (await pollStep(t.app, "flat", 2)) as Done;
    expect(view.result).toMatchObject({ applied: false, noopReason: "empty_batch", optimizerSteps: 0 });
    expect((await postStep(t.app, pairBatch("flat", 3))).status).toBe(202);
    expect(((await pollStep(t.app, "flat", 3)) as Done).result).toMatchObject({ applied: true });
  });

  it("redoes a step interrupted by a worker crash once, and replays a finished step", async () => {
    const iterations = 3;
    const clean = await postStep(t.app, pairBatch("clean", 1, [1, 0], iterations));
    expect(clean.status).toBe(202);
    const reference = (await pollStep(t.app, "clean", 1)) as Done;
    expect(reference.result.optimizerSteps).toBe(iterations);
    expect(reference.result.clipFraction).toBeLessThan(1); // gradients flowed: the step changed the adapter

    // Its adapter, handed over by reference: the files under the step's URL hash to its adapterHash.
    const digest = createHash("sha256");
    for (const file of ["adapter_config.json", "adapter_model.safetensors"]) {
      const res = await t.app.request(`/v1/steps/clean/1/adapter/${file}`);
      expect(res.status).toBe(200);
      digest
        .update(`${file}\0`)
        .update(Buffer.from(await res.arrayBuffer()))
        .update("\0");
    }
    expect(digest.digest("hex")).toBe(reference.result.adapterHash);
    expect((await t.app.request("/v1/steps/clean/2/adapter/adapter_config.json")).status).toBe(404);
    expect((await t.app.request("/v1/steps/clean/1/adapter/..%2Fresult.json")).status).toBe(400);

    expect((await postStep(t.app, pairBatch("crash", 1, [1, 0], iterations))).status).toBe(202);
    await pollStep(t.app, "crash", 1, (v) => v.state === "running" && v.progress.phase === "train");
    const pid = t.worker.info.pid!;
    process.kill(pid, "SIGKILL");
    const failed = await pollStep(t.app, "crash", 1);
    expect(failed).toMatchObject({ state: "failed", error: { code: "worker_crashed", retryable: true } });

    const busy = await postStep(t.app, pairBatch("crash", 1, [1, 0], iterations));
    expect(busy.status).toBe(503); // the worker is reloading the model: retryable
    await t.worker.ready();
    expect(t.worker.info.pid).not.toBe(pid);
    expect((await postStep(t.app, pairBatch("crash", 1, [1, 0], iterations))).status).toBe(202);
    const redone = (await pollStep(t.app, "crash", 1)) as Done;
    // One application: the optimiser counted `iterations` updates, and the adapter is bit-identical
    // to the uninterrupted run's.
    expect(redone.result.optimizerSteps).toBe(iterations);
    expect(redone.result.adapterHash).toBe(reference.result.adapterHash);

    const again = await postStep(t.app, pairBatch("crash", 1, [1, 0], iterations));
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ state: "done", result: { ...redone.result, replayed: true } });
    const other = await postStep(t.app, pairBatch("crash", 1, [0, 1], iterations));
    expect(other.status).toBe(409);
  });

  it("cancels a running step on request: the worker restarts, the step fails as cancelled, and runs again", async () => {
    const batch = pairBatch("cancelled", 1, [1, 0], 3);
    const attempt = (n: number) => ({ "content-type": "application/json", "x-bridle-attempt": String(n) });
    const submit = (n: number) =>
      t.app.request("/v1/steps", { method: "POST", headers: attempt(n), body: JSON.stringify(batch) });
    expect((await submit(1)).status).toBe(202);
    await pollStep(t.app, "cancelled", 1, (v) => v.state === "running" && v.progress.phase === "train");
    const pid = t.worker.info.pid!;
    // Attempt 1 of the activity timed out and its retry (attempt 2) took the step over: the stale
    // attempt's cancel must not stop it.
    expect((await submit(2)).status).toBe(202);
    const stale = await t.app.request("/v1/steps/cancelled/1", { method: "DELETE", headers: attempt(1) });
    expect(stale.status).toBe(409);
    expect(t.worker.info.pid).toBe(pid);
    const cancel = await t.app.request("/v1/steps/cancelled/1", { method: "DELETE", headers: attempt(2) });
    expect(cancel.status).toBe(202);
    const failed = await pollStep(t.app, "cancelled", 1);
    expect(failed).toMatchObject({ state: "failed", error: { code: "step_cancelled", retryable: false } });
    expect((await t.app.request("/v1/steps/cancelled/1", { method: "DELETE" })).status).toBe(404);
    await t.worker.ready();
    expect(t.worker.info.pid).not.toBe(pid);
    // Not a death of the worker: the same batch runs again, to the end.
    expect((await postStep(t.app, batch)).status).toBe(202);
    const done = (await pollStep(t.app, "cancelled", 1)) as Done;
    expect(done.result.optimizerSteps).toBe(3);
  });

  it("fails a batch for good once it has killed the worker three times in a row (an OOM loop)", async () => {
    const batch = pairBatch("killer", 1, [1, 0], 3);
    for (let death = 1; death <= MAX_WORKER_DEATHS; death++) {
      await t.worker.ready();
      expect((await postStep(t.app, batch)).status).toBe(202);
      await pollStep(t.app, "killer", 1, (v) => v.state === "running" && v.progress.phase === "train");
      process.kill(t.worker.info.pid!, "SIGKILL");
      const failed = await pollStep(t.app, "killer", 1);
      const last = death === MAX_WORKER_DEATHS;
      expect(failed).toMatchObject({
        state: "failed",
        error: last
          ? { code: "step_kills_worker", retryable: false }
          : { code: "worker_crashed", retryable: true },
      });
      if (last && failed.state === "failed")
        expect(failed.error.message).toMatch(/died 3 times in a row.*OOM/);
    }
    await t.worker.ready();
    const refused = await postStep(t.app, batch);
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ error: { code: "step_kills_worker" } });
  }, 240_000);
});
