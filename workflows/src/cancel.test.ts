import { existsSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { TaskQueues, TrainingRunConfig } from "@bridle/contracts";
import { repoRoot } from "@bridle/service-kit";
import { WorkflowFailedError } from "@temporalio/client";
import { CancelledFailure } from "@temporalio/common";
import { Runtime } from "@temporalio/worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createActivities } from "./activities.ts";
import { type DevTemporal, standInActivities, startDevTemporal } from "./stand-ins.ts";

/**
 * A cancelled training run stops the rollout it is waiting for: the real rollout activity, on a real
 * Temporal dev server, against a STAND-IN RUNNER (an HTTP test double that holds each rollout open
 * until it is told to cancel it). That the real runner then kills the harness and removes the
 * sandbox is services/runner's test "a rollout cancelled while it runs".
 */
const temporalBin = join(process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle"), "venv", "bin", "temporal");

describe("a training run cancelled mid-rollout", () => {
  let temporal: DevTemporal;
  let runner: Server;
  const started: string[] = [];
  const cancelled: string[] = [];
  const held = new Map<string, ServerResponse>();

  beforeAll(async () => {
    if (!existsSync(temporalBin)) throw new Error(`no Temporal CLI at ${temporalBin}: run ./bridle install`);
    Runtime.install({
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never,
    });
    runner = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (req.method === "POST" && req.url === "/v1/rollouts") {
        let body = "";
        req.on("data", (chunk) => {
          body += chunk;
        });
        req.on("end", () => {
          const id = (JSON.parse(body) as { rolloutId: string }).rolloutId;
          started.push(id);
          held.set(id, res); // answered only when cancelled
        });
        return;
      }
      const id = decodeURIComponent(req.url?.replace(/^\/v1\/rollouts\//, "") ?? "");
      if (req.method === "DELETE" && held.has(id)) {
        cancelled.push(id);
        const error = { code: "rollout_cancelled", message: `rollout ${id} was cancelled`, retryable: false };
        held.get(id)?.writeHead(409, { "content-type": "application/json" }).end(JSON.stringify({ error }));
        held.delete(id);
        res.writeHead(202, { "content-type": "application/json" }).end(JSON.stringify({ rolloutId: id }));
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => runner.listen(0, "127.0.0.1", resolve));
    const { port } = runner.address() as AddressInfo;
    const real = createActivities({
      servingUrl: "http://127.0.0.1:9",
      tasksUrl: "http://127.0.0.1:9",
      runnerUrl: `http://127.0.0.1:${port}`,
      guardUrl: "http://127.0.0.1:9",
      guardAdminToken: "unused",
      trainerUrl: "http://127.0.0.1:9",
      dataDir: "/nonexistent",
    });
    const standIns = standInActivities({ reward: () => 0, applied: () => false });
    temporal = await startDevTemporal(temporalBin);
    await temporal.work({ ...standIns, runRollout: real.runRollout });
  }, 120_000);

  afterAll(async () => {
    for (const res of held.values()) res.destroy();
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
});
