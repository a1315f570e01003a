import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { ModelCall, TrainStepView } from "@bridle/contracts";
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

  it("refuses a batch without trajectories or samples", async () => {
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

describe("a batch by reference", () => {
  /** A guard's answer for one session: each call served by `version` of model "m". */
  const trajectoryOf = (sessionId: string, call: ModelCall, version: number | null) => ({
    sessionId,
    calls: 1,
    mainBranch: [0],
    abandoned: [],
    stitchedBy: "token-ids",
    stitches: { "token-ids": 0, messages: 0, "new-branch": 1 },
    toolCalls: 0,
    blocked: 0,
    rewardZero: false,
    records: [
      {
        seq: 0,
        sessionId,
        api: "openai",
        stream: false,
        startedAt: new Date().toISOString(),
        durationMs: 1,
        adapter: "m",
        servedModel: "m",
        servedBy: { model: "m", adapter: version === null ? null : "a", version, hash: null },
        request: {},
        response: { content: "", finishReason: "stop" },
        toolCalls: [],
        notices: [],
        usage: null,
        promptTokenIds: call.promptTokenIds,
        completionTokenIds: call.completionTokenIds,
        logprobs: call.logprobs,
        error: null,
      },
    ],
  });

  it("reads each trajectory from its URL once, trains on the proven ones and counts the rest as refused", async () => {
    // A stand-in for the guards that recorded the rollouts: it answers each session's trajectory
    // and counts the reads (the guard's own read grant is checked in the guard's tests).
    const [good, bad] = pairBatch("refs", 1).trajectories.map((t) => t.calls[0]!);
    const sessions: Record<string, unknown> = {
      s1: trajectoryOf("s1", good!, 1),
      s2: trajectoryOf("s2", bad!, 1),
      s3: trajectoryOf("s3", good!, 2), // served by another version: not trained on
    };
    const reads: string[] = [];
    const guard = createServer((req, res) => {
      reads.push(req.url ?? "");
      const id = /^\/admin\/sessions\/(\w+)\/trajectory\?grant=/.exec(req.url ?? "")?.[1];
      const body = id ? sessions[id] : undefined;
      res.writeHead(body ? 200 : 404, { "content-type": "application/json" });
      res.end(
        JSON.stringify(body ?? { error: { code: "not_found", message: "no session", retryable: false } }),
      );
    });
    await new Promise<void>((r) => guard.listen(0, "127.0.0.1", r));
    const port = (guard.address() as AddressInfo).port;
    const ref = (id: string, reward: number) => ({
      group: "g",
      reward,
      url: `http://127.0.0.1:${port}/admin/sessions/${id}/trajectory?grant=secret-${id}`,
    });
    try {
      const { trajectories: _, ...rest } = pairBatch("refs", 1);
      const body = {
        ...rest,
        samples: [ref("s1", 1), ref("s2", 0), ref("s3", 1)],
        served: { model: "m", version: 1 },
      };
      expect((await postStep(t.app, body)).status).toBe(202);
      const done = (await pollStep(t.app, "refs", 1)) as Done;
      expect(done.result).toMatchObject({ applied: true, refused: 1, calls: 2 });
      expect(reads).toHaveLength(3);
      // Submitted again (an activity's retry): the committed step, nothing read twice.
      const again = await postStep(t.app, body);
      expect(again.body).toMatchObject({ state: "done", result: { refused: 1, replayed: true } });
      expect(reads).toHaveLength(3);

      // A guard that cannot be reached fails the step as retryable, without the grant in the message.
      guard.close();
      const lost = {
        ...rest,
        step: 2,
        samples: [ref("s1", 1), ref("s2", 0)],
        served: { model: "m", version: 1 },
      };
      expect((await postStep(t.app, lost)).status).toBe(202);
      const failed = await pollStep(t.app, "refs", 2);
      expect(failed).toMatchObject({ state: "failed", error: { code: "unreachable", retryable: true } });
      if (failed.state === "failed") {
        expect(failed.error.message).toContain(`127.0.0.1:${port}/admin/sessions/s1/trajectory`);
        expect(failed.error.message).not.toContain("grant");
      }
    } finally {
      guard.close();
    }
  });
});
