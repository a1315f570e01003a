import { existsSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { adapterName, TaskQueues, TrainingRunConfig } from "@bridle/contracts";
import { repoRoot } from "@bridle/service-kit";
import { WorkflowFailedError } from "@temporalio/client";
import { CancelledFailure } from "@temporalio/common";
import { Runtime } from "@temporalio/worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createActivities } from "./activities.ts";
import { type DevTemporal, standInActivities, standInResult, startDevTemporal } from "./stand-ins.ts";

/**
 * A cancelled training run stops the work it is waiting for: the real rollout and training-step
 * activities, on a real Temporal dev server, against STAND-IN SERVICES (one HTTP test double playing
 * the runner, the guard's trajectory reads, the trainer and serving): a rollout of run `cancel-me`
 * runs until it is cancelled; those of `cancel-step` finish at once and its step runs until
 * cancelled; `cancel-load` trains at once (a stand-in step) and its adapter load never ends. That
 * the real runner then kills the harness and removes the sandbox, the real trainer restarts its
 * worker and real serving stops the load, is tested in services/runner, trainer and serving.
 */
/** The guard's record of a session whose model calls carried nothing to train on. */
const noCalls = {
  sessionId: "s",
  calls: 0,
  mainBranch: [],
  abandoned: [],
  stitchedBy: "token-ids",
  stitches: { "token-ids": 0, messages: 0, "new-branch": 0 },
  toolCalls: 0,
  blocked: 0,
  rewardZero: false,
  records: [],
};

const temporalBin = join(process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle"), "venv", "bin", "temporal");

describe("a training run cancelled mid-rollout", () => {
  let temporal: DevTemporal;
  let runner: Server;
  const started: string[] = [];
  const cancelled: string[] = [];
  /** Rollouts of `cancel-me` in flight, until cancelled. */
  const held = new Set<string>();
  const stepsCancelled: string[] = [];
  const loadsCancelled: string[] = [];
  const json = (res: ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));

  beforeAll(async () => {
    if (!existsSync(temporalBin)) throw new Error(`no Temporal CLI at ${temporalBin}: run ./bridle install`);
    Runtime.install({
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never,
    });
    runner = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (req.method === "POST" && req.url === "/v1/rollouts?wait=false") {
        let body = "";
        req.on("data", (chunk) => {
          body += chunk;
        });
        req.on("end", () => {
          const request = JSON.parse(body) as {
            rolloutId: string;
            taskId: string;
            harness: string;
            model: string;
          };
          const id = request.rolloutId;
          if (id.startsWith("cancel-step/") || id.startsWith("cancel-load/")) {
            const result = standInResult(request, Number(id.endsWith("g0")));
            return json(res, 202, { state: "done", rolloutId: id, result });
          }
          started.push(id);
          held.add(id); // running until cancelled
          json(res, 202, { state: "running", rolloutId: id, elapsedMs: 0 });
        });
        return;
      }
      const state = /^\/v1\/rollouts\/(.+)\/state$/.exec(req.url ?? "");
      if (state && req.method === "GET") {
        const id = decodeURIComponent(state[1]!);
        if (held.has(id)) return json(res, 200, { state: "running", rolloutId: id, elapsedMs: 1 });
        const error = { status: 409, code: "rollout_cancelled", message: "cancelled", retryable: false };
        return json(res, 200, { state: "failed", rolloutId: id, error });
      }
      if (req.method === "GET" && req.url?.startsWith("/admin/sessions/")) return json(res, 200, noCalls);
      const step = /^\/v1\/steps(?:\/([^/]+)\/(\d+))?$/.exec(req.url ?? "");
      if (step && req.method === "DELETE") {
        stepsCancelled.push(`${step[1]}/${step[2]}`);
        return json(res, 202, { run: step[1], step: Number(step[2]), cancelled: true });
      }
      if (step) {
        req.resume();
        const progress = { phase: "train", done: 0, total: 3 };
        return json(res, 202, { state: "running", run: "cancel-step", step: 1, progress });
      }
      const load = /^\/v1\/adapters\/(.+)\/versions(?:\/(\d+))?$/.exec(req.url ?? "");
      if (load) {
        req.resume();
        const now = new Date().toISOString();
        const version = {
          name: load[1],
          version: 1,
          servedName: `${load[1]}@v1`,
          path: "/a/1",
          hash: "h",
          step: 1,
          state: "loading",
          error: null,
          canaryDelta: null,
          createdAt: now,
          updatedAt: now,
        };
        if (req.method === "DELETE") {
          loadsCancelled.push(`${load[1]}@v${load[2]}`);
          return json(res, 200, { ...version, state: "retired" });
        }
        return json(res, req.method === "POST" ? 202 : 200, version);
      }
      const id = decodeURIComponent(req.url?.replace(/^\/v1\/rollouts\//, "") ?? "");
      if (req.method === "DELETE" && held.has(id)) {
        cancelled.push(id);
        held.delete(id);
        res.writeHead(202, { "content-type": "application/json" }).end(JSON.stringify({ rolloutId: id }));
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => runner.listen(0, "127.0.0.1", resolve));
    const { port } = runner.address() as AddressInfo;
    const standIn = `http://127.0.0.1:${port}`;
    const real = createActivities({
      servingUrl: standIn,
      tasksUrl: "http://127.0.0.1:9",
      runnerUrl: standIn,
      guardUrl: standIn,
      guardAdminToken: "unused",
      trainerUrl: standIn,
      dataDir: "/nonexistent",
    });
    const standIns = standInActivities({ reward: () => 0, applied: () => true });
    temporal = await startDevTemporal(temporalBin);
    await temporal.work({
      ...standIns,
      runRollout: real.runRollout,
      trainStep: (input) => (input.run === "cancel-load" ? standIns.trainStep! : real.trainStep)(input),
      loadAdapter: real.loadAdapter,
    });
  }, 120_000);

  afterAll(async () => {
    runner?.close();
    await temporal?.stop();
  });

  it("tells the runner to cancel each rollout in flight, and ends CANCELLED", async () => {
    const config = TrainingRunConfig.parse({ name: "cancel-me", steps: 1, batchSize: 1, groupSize: 2 });
    const handle = await temporal.client.workflow.start("trainingRun", {
      taskQueue: TaskQueues.control,
      workflowId: `run-${config.name}`,
      args: [{ config }],
    });
    const deadline = Date.now() + 30_000;
    while (started.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(started.sort()).toEqual(["cancel-me/s1/c0-t/g0", "cancel-me/s1/c0-t/g1"]);

    await handle.cancel();
    const outcome = await handle.result().catch((err: unknown) => err);
    expect(outcome).toBeInstanceOf(WorkflowFailedError);
    expect((outcome as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    // The activities hear of the cancellation at their next heartbeat (every 5 s).
    const stopBy = Date.now() + 30_000;
    while (cancelled.length < 2 && Date.now() < stopBy) await new Promise((r) => setTimeout(r, 100));
    expect(cancelled.sort()).toEqual(started);
    expect(held.size).toBe(0);
  }, 90_000);

  it("tells the trainer to cancel the step in flight, and ends CANCELLED", async () => {
    const config = TrainingRunConfig.parse({ name: "cancel-step", steps: 1, batchSize: 1, groupSize: 2 });
    const handle = await temporal.client.workflow.start("trainingRun", {
      taskQueue: TaskQueues.control,
      workflowId: `run-${config.name}`,
      args: [{ config }],
    });
    // The step runs once its activity has polled the (never finishing) stand-in trainer for a while.
    await new Promise((r) => setTimeout(r, 3_000));
    await handle.cancel();
    const outcome = await handle.result().catch((err: unknown) => err);
    expect((outcome as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    const stopBy = Date.now() + 30_000;
    while (stepsCancelled.length < 1 && Date.now() < stopBy) await new Promise((r) => setTimeout(r, 100));
    expect(stepsCancelled).toEqual(["cancel-step/1"]);
  }, 90_000);

  it("tells serving to cancel the adapter load in flight, and ends CANCELLED", async () => {
    const config = TrainingRunConfig.parse({ name: "cancel-load", steps: 1, batchSize: 1, groupSize: 2 });
    const handle = await temporal.client.workflow.start("trainingRun", {
      taskQueue: TaskQueues.control,
      workflowId: `run-${config.name}`,
      args: [{ config }],
    });
    const loading = Date.now() + 30_000;
    while ((await handle.query<{ phase: string }>("progress")).phase !== "loading" && Date.now() < loading)
      await new Promise((r) => setTimeout(r, 200));
    await new Promise((r) => setTimeout(r, 2_000)); // a poll or two of the version
    await handle.cancel();
    const outcome = await handle.result().catch((err: unknown) => err);
    expect((outcome as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    const stopBy = Date.now() + 30_000;
    while (loadsCancelled.length < 1 && Date.now() < stopBy) await new Promise((r) => setTimeout(r, 100));
    const adapter = adapterName({ model: config.baseModel, harness: config.harness, run: config.name });
    expect(loadsCancelled).toEqual([`${adapter}@v1`]);
  }, 90_000);
});
